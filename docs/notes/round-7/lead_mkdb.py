"""Stores for the keyword A/Bs: the peer corpus (filled.db), then two 5 s POST rows at c32 as bench/peer.py runs them (posted.db), in DIR.
usage: .venv/bin/python docs/notes/round-7/lead_mkdb.py DIR"""
import os, sys, time, tempfile, shutil, sqlite3
from pathlib import Path
tree = Path(__file__).resolve().parents[3]; sys.path.insert(0, str(tree / "bench"))
import load, peer
from run import Server, Wrk, ensure_wrk
sessions = peer.corpus(); gen = load.TextGenerator(seed=16)
work = Path(tempfile.mkdtemp(prefix="mkdb-", dir=load.DATA))
(work / "q.txt").write_text("\n".join(gen.queries(2000)) + "\n"); (work / "w.txt").write_text("\n".join(gen.words[:3000]) + "\n")
wrk = Wrk(ensure_wrk(), {"BENCH_MAX_ID": "20000", "BENCH_SESSIONS": "100", "BENCH_QUERIES": str(work / "q.txt"), "BENCH_WORDS": str(work / "w.txt")})
(work / "a").mkdir(); s = Server(work / "a", {})
try:
    peer.fill_project(s.url, sessions); s.wait_for_backlog(300)
finally:
    s.stop()
shutil.copy(work / "a/memory.db", str(Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "filled.db"))
s = Server(work / "a", {})
try:
    for _ in range(2):
        wrk.run(s.url, "post_episode.lua", 32, 5)
    s.wait_for_backlog(300)
finally:
    s.stop()
shutil.copy(work / "a/memory.db", str(Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "posted.db"))
shutil.rmtree(work, ignore_errors=True)
