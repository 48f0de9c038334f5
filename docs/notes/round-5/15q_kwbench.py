"""In-process CPU per keyword search (SqliteKeywordIndex, no HTTP): the route query (all) and hybrid leg (any).
usage: 15q_kwbench.py <tree> <copy of the peer-bench store, e.g. made by 15q_micro.py with DB_DIR>"""
import asyncio, sys, random, time, os
tree = sys.argv[1]
sys.path.insert(0, tree); sys.path.insert(0, tree + "/bench")
import load
from adapters.sqlite.store import SqliteStore
from domain.keywords import plain_query, recall_query
store = SqliteStore.open(sys.argv[2])  # a COPY of a store (it is migrated)
gen = load.TextGenerator(seed=16); qs = gen.queries(2000)
rng = random.Random(3)
async def main():
    for label, make in (("route all", lambda q: plain_query(q, "all")), ("leg any", recall_query)):
        for q in qs[:300]: await store.keywords.search("episodes", make(q), 10)
        picks = [rng.choice(qs) for _ in range(4000)]
        c0 = time.process_time()
        for q in picks: await store.keywords.search("episodes", make(q), 10)
        print(f"{label}: {1e6*(time.process_time()-c0)/len(picks):.1f} us CPU/search", flush=True)
asyncio.run(main())
