"""One store, several server trees (round 9, lead): serve a copy of DB with each variant, wrk rows alternating.
usage: [ROUNDS=3 SECS=5] .venv/bin/python docs/notes/round-9/ab_store.py DB ROUTES "A:K=V ..." "B:K=V ..."
ROUTES: comma-separated of id,sess,s8,s1 (the peer bench's scripts and connections); a variant is a name and the
environment its server gets (PYTHONPATH=<a git archive of another commit> to run other code)."""
import os, sys, time, shutil, statistics, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import load, peer
from run import Server, Wrk, ensure_wrk
db = Path(sys.argv[1]); routes = sys.argv[2].split(",")
variants = [(v.split(":",1)[0], dict(e.split("=",1) for e in v.split(":",1)[1].split())) for v in sys.argv[3:]]
secs = float(os.environ.get("SECS", "5")); rounds = int(os.environ.get("ROUNDS", "3"))
work = Path(tempfile.mkdtemp(prefix="abs-", dir=load.DATA))
gen = load.TextGenerator(seed=16)  # the peer bench's queries and words
(work / "q.txt").write_text("\n".join(gen.queries(2000)) + "\n"); (work / "w.txt").write_text("\n".join(gen.words[:3000]) + "\n")
wrk = Wrk(ensure_wrk(), {"BENCH_MAX_ID": "20000", "BENCH_SESSIONS": "100", "BENCH_QUERIES": str(work / "q.txt"), "BENCH_WORDS": str(work / "w.txt")})
spec = {"id": ("get_episode.lua", 32), "sess": ("session_episodes.lua", 32), "s8": ("keyword_search.lua", 8), "s1": ("keyword_search.lua", 1)}
servers = []
try:
    for name, env in variants:
        (work / name).mkdir(); shutil.copy(db, work / name / "memory.db")
        s = Server(work / name, env); servers.append((name, s))
    for name, s in servers:
        s.wait_for_backlog(600); time.sleep(6); peer.wait_for_index_builds(s, 900); time.sleep(3); wrk.run(s.url, "get_episode.lua", 8, 2)
    res = {(n, r): [] for n, _ in servers for r in routes}
    for rnd in range(rounds):
        order = servers if rnd % 2 == 0 else servers[::-1]
        for r in routes:
            script, conns = spec[r]
            for name, s in order:
                res[(name, r)].append(wrk.run(s.url, script, conns, secs, s.pid))
    print(f"load {os.getloadavg()[0]:.2f}")
    for r in routes:
        for name, _ in servers:
            rows = res[(name, r)]
            print(f"{r:5} {name:8} req/s {statistics.median(x['req_per_s'] for x in rows):8.1f} [{', '.join(str(round(x['req_per_s'])) for x in rows)}] p50 {statistics.median(x['p50_ms'] for x in rows):.3f} cpu/req {statistics.median(x.get('server_cpu_ms_per_req') or 0 for x in rows):.3f}")
finally:
    for _, s in servers: s.stop()
    shutil.rmtree(work, ignore_errors=True)
