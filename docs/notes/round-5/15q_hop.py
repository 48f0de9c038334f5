"""Thread hop vs inline read: CPU per read of SELECT 1 through SqliteDatabase.read and .read_point.
usage: 15q_hop.py <a copy of a store.db> [tree]"""
import asyncio, sys, time
sys.path.insert(0, sys.argv[2] if len(sys.argv) > 2 else ".")
from adapters.sqlite.database import SqliteDatabase
db = SqliteDatabase(sys.argv[1])
async def main():
    fn = lambda c: c.execute("SELECT 1").fetchone()
    for r in range(3):
        for name in ("read", "read_point"):
            m = getattr(db, name)
            await m(fn)
            c0 = time.process_time(); w0 = time.perf_counter()
            for _ in range(5000): await m(fn)
            print(name, f"{1e6*(time.process_time()-c0)/5000:.1f} us CPU  {1e6*(time.perf_counter()-w0)/5000:.1f} us wall")
asyncio.run(main())
db.close()
