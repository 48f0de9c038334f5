"""Keyword SQL by query group, system SQLite vs the bundled one (round 10, lead).
usage: .venv/bin/python docs/notes/round-10/bm25_groups.py DB std|bundled [QUERIES]
QUERIES: one query per line (the peer bench's: load.TextGenerator(seed=16).queries(2000)); default the bench's."""
import statistics, sys, time
from pathlib import Path

if sys.argv[2] == "std":
    import sqlite3
else:
    from pysqlite3 import dbapi2 as sqlite3
if len(sys.argv) > 3:
    queries = [line.strip() for line in open(sys.argv[3]) if line.strip()][:1000]
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    import load
    queries = load.TextGenerator(seed=16).queries(2000)[:1000]
conn = sqlite3.connect(sys.argv[1])
for pragma in ("PRAGMA cache_size = -65536", "PRAGMA mmap_size = 268435456"):
    conn.execute(pragma)


def match(q: str) -> str:
    return " ".join('"' + t + '"' for t in q.split())


count = {q: conn.execute("SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH ?", (match(q),)).fetchone()[0]
         for q in queries}
groups = {"0": (0, 0), "1": (1, 1), "2-20": (2, 20), "21-300": (21, 300), ">300": (301, 1 << 62)}
statements = {
    "walk": "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH ?",
    "bm25 top 10": "SELECT rowid, bm25(episodes_fts) r FROM episodes_fts WHERE episodes_fts MATCH ? ORDER BY r LIMIT 10",
}
print(f"SQLite {sqlite3.sqlite_version}")
for name, (low, high) in groups.items():
    chosen = [q for q in queries if low <= count[q] <= high]
    line = f"{name:7s} n={len(chosen):4d} words={statistics.mean(len(q.split()) for q in chosen) if chosen else 0:.1f}"
    for label, sql in statements.items():
        began = time.perf_counter()
        for _ in range(3):
            for q in chosen:
                conn.execute(sql, (match(q),)).fetchall()
        line += f"  {label} {(time.perf_counter() - began) / max(1, 3 * len(chosen)) * 1e6:7.1f} us"
    print(line)
