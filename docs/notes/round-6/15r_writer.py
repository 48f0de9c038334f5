"""Writer-thread CPU per POST-shaped write (``writes.add_episodes`` of one episode, as POST /episodes
runs it) in groups of CONC concurrent writes, on a copy of the peer bench's corpus (20k episodes).

    .venv/bin/python docs/notes/round-6/15r_writer.py TREE N CONC [full|nofts]

``nofts`` drops the episodes' FTS insert trigger in the copy first (what the keyword index costs).
Then the same N writes run statement by statement on one connection, 16 per transaction, and the
CPU of each statement kind is printed (``INSERT INTO episodes`` includes its FTS trigger)."""
import asyncio
import collections
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

tree = sys.argv[1]
sys.path.insert(0, tree)
sys.path.insert(0, tree + "/bench")
import load  # noqa: E402
from adapters.sqlite.database import _configure  # noqa: E402
from adapters.sqlite.store import SqliteStore  # noqa: E402
from adapters.sqlite.unit_of_work import SqliteTransaction  # noqa: E402
from domain import writes  # noqa: E402
from domain.models import NewEpisode  # noqa: E402

N, CONC = int(sys.argv[2]), int(sys.argv[3])
variant = sys.argv[4] if len(sys.argv) > 4 else "full"
corpus = Path(__file__).resolve().parents[3] / "bench/data/15r-corpus/memory.db"
work = Path(tempfile.mkdtemp(prefix="15r-writer-"))
gen = load.TextGenerator(seed=16)
words = gen.words[:3000]
random.seed(1)


def sentence(lo: int, hi: int) -> str:
    return " ".join(words[int(random.random() ** 2 * len(words))] for _ in range(random.randint(lo, hi)))


episodes = [NewEpisode(session_id=random.randint(1, 100), user_message=sentence(6, 24), ai_response=sentence(12, 48))
            for _ in range(N)]


def fresh(name: str) -> str:
    path = str(work / name)
    shutil.copy(corpus, path)
    if variant == "nofts":
        conn = sqlite3.connect(path)
        conn.execute("DROP TRIGGER episodes_fts_insert")
        conn.commit()
        conn.close()
    return path


async def grouped() -> None:
    store = SqliteStore.open(fresh("w.db"))
    tid = store.database._writer.native_id

    def writer_cpu() -> float:
        fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    c0, p0 = writer_cpu(), time.process_time()
    for i in range(0, N, CONC):
        await asyncio.gather(*(store.uow.run(lambda tx, e=e: writes.add_episodes(tx, [e])) for e in episodes[i:i + CONC]))
    c1, p1 = writer_cpu(), time.process_time()
    print(f"{variant} groups of {CONC}: writer thread {1e6 * (c1 - c0) / N:6.1f} us/write, "
          f"process {1e6 * (p1 - p0) / N:6.1f} us/write", flush=True)
    store.database.close()


def by_statement() -> None:
    conn = sqlite3.connect(fresh("s.db"), isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    _configure(conn, writer=True)
    spent: collections.Counter = collections.Counter()

    class Timed:
        def execute(self, sql, *args):
            t0 = time.process_time()
            result = conn.execute(sql, *args)
            spent[sql.split("(")[0][:44]] += time.process_time() - t0
            return result

        def __getattr__(self, name):
            return getattr(conn, name)

    timed = Timed()
    for i in range(0, N, 16):
        timed.execute("BEGIN IMMEDIATE")
        for e in episodes[i:i + 16]:
            timed.execute("SAVEPOINT one_write")
            writes.add_episodes(SqliteTransaction(timed), [e])  # type: ignore[arg-type]
            timed.execute("RELEASE one_write")
        timed.execute("COMMIT")
    for sql, seconds in spent.most_common(8):
        print(f"  {1e6 * seconds / N:6.1f} us/write  {sql}")
    conn.close()


asyncio.run(grouped())
by_statement()
shutil.rmtree(work, ignore_errors=True)
