"""The peer bench's 2,000 keyword queries through the real SQLite adapter (no HTTP), 3 rounds:
CPU per search, how many were stopped at the short-read step budget (overflowed) and how many ran
on a reader thread (pooled), and the CPU of the overflowed ones apart.

    .venv/bin/python docs/notes/round-6/15r_kw.py TREE [DB]

TREE: the code to run (this tree, or a `git archive main` copy). DB: a store to copy first (default:
bench/data/15r-corpus/memory.db of this tree, which 15r_ab.py fills with the peer bench's corpus)."""
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

tree = sys.argv[1]
sys.path.insert(0, tree)
sys.path.insert(0, tree + "/bench")
import load  # noqa: E402
from adapters.sqlite.short_reads import OverflowRates  # noqa: E402
from adapters.sqlite.store import SqliteStore  # noqa: E402
from domain.keywords import plain_query  # noqa: E402

source = sys.argv[2] if len(sys.argv) > 2 else str(Path(__file__).resolve().parents[3] / "bench/data/15r-corpus/memory.db")
copy = Path(tempfile.mkdtemp(prefix="15r-kw-")) / "k.db"
shutil.copy(source, copy)
store = SqliteStore.open(str(copy))
queries = load.TextGenerator(seed=16).queries(2000)


async def main() -> None:
    db = store.database
    overflows = reads = 0

    class Counting(OverflowRates):
        __slots__ = ()

        def record(self, site, over):
            nonlocal overflows
            overflows += over
            super().record(site, over)

    db._overflows = Counting()
    read = db.read

    async def counting_read(fn):
        nonlocal reads
        reads += 1
        return await read(fn)

    db.read = counting_read
    for rnd in range(3):
        overflows = reads = 0
        apart = {True: [], False: []}
        c0 = time.process_time()
        for q in queries:
            o0, t0 = overflows, time.process_time()
            await store.keywords.search("episodes", plain_query(q), 10)
            apart[overflows > o0].append(time.process_time() - t0)
        spent = time.process_time() - c0
        line = " ".join(f"{'overflowed' if k else 'rest'} {len(v)} x {1e6 * sum(v) / len(v):.0f} us"
                        for k, v in apart.items() if v)
        print(f"round {rnd}: {1e6 * spent / len(queries):6.1f} us CPU/search, overflowed {overflows}, "
              f"pooled {reads} ({line})", flush=True)
    db.close()


asyncio.run(main())
