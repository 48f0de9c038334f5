"""A/B of server variants on the peer bench corpus, wrk rows alternating (round 7, lead).
usage: [ROUNDS=3 SECS=5] [AB_STORE=DB] .venv/bin/python docs/notes/round-7/lead_ab.py TREE ROUTES "A:K=V K=V" "B:K=V" ...
AB_STORE: serve a copy of that SQLite file with each variant instead of loading the corpus (round 9).
ROUTES: comma-separated of post,id,sess,s8,s1. A variant is a name and the environment its server gets
(e.g. PYTHONPATH=<a git archive of another commit> to run other code)."""
import os, sys, time, tempfile, shutil, statistics
from pathlib import Path
tree = Path(sys.argv[1]); routes = sys.argv[2].split(","); variants = [(v.split(":",1)[0], dict(e.split("=",1) for e in v.split(":",1)[1].split())) for v in sys.argv[3:]]
secs = float(os.environ.get("SECS", "5")); rounds = int(os.environ.get("ROUNDS", "3"))
sys.path.insert(0, str(tree / "bench"))
import load, peer
from run import Server, Wrk, ensure_wrk, cpu_seconds
sessions = peer.corpus(); gen = load.TextGenerator(seed=16)
work = Path(tempfile.mkdtemp(prefix="ab-", dir=load.DATA))
(work / "q.txt").write_text("\n".join(gen.queries(2000)) + "\n"); (work / "w.txt").write_text("\n".join(gen.words[:3000]) + "\n")
wrk = Wrk(ensure_wrk(), {"BENCH_MAX_ID": "20000", "BENCH_SESSIONS": "100", "BENCH_QUERIES": str(work / "q.txt"), "BENCH_WORDS": str(work / "w.txt")})
spec = {"post": ("post_episode.lua", 32), "id": ("get_episode.lua", 32), "sess": ("session_episodes.lua", 32),
        "s8": ("keyword_search.lua", 8), "s1": ("keyword_search.lua", 1)}
servers = []
try:
    for name, env in variants:
        (work / name).mkdir()
        if os.environ.get("AB_STORE"):  # round 9: every variant serves a copy of one store (its index rebuilt)
            shutil.copy(os.environ["AB_STORE"], work / name / "memory.db")
        s = Server(work / name, env); servers.append((name, s))
        if not os.environ.get("AB_STORE"):
            peer.fill_project(s.url, sessions)
    for name, s in servers:
        s.wait_for_backlog(300); time.sleep(6); peer.wait_for_index_builds(s, 600); wrk.run(s.url, "get_episode.lua", 8, 2)
    res = {(n, r): [] for n, _ in servers for r in routes}
    for rnd in range(rounds):
        order = servers if rnd % 2 == 0 else servers[::-1]
        for r in routes:
            script, conns = spec[r]
            for name, s in order:
                row = wrk.run(s.url, script, conns, secs, s.pid)
                res[(name, r)].append(row)
                if r == "post":
                    s.wait_for_backlog(120); time.sleep(6); peer.wait_for_index_builds(s, 600)
    print(f"load {os.getloadavg()[0]:.2f}")
    for r in routes:
        for name, _ in servers:
            rows = res[(name, r)]
            print(f"{r:5} {name:8} req/s {statistics.median(x['req_per_s'] for x in rows):8.1f} "
                  f"[{', '.join(str(round(x['req_per_s'])) for x in rows)}] p50 {statistics.median(x['p50_ms'] for x in rows):.3f} "
                  f"p99 {statistics.median(x['p99_ms'] for x in rows):.2f} cpu/req {statistics.median(x.get('server_cpu_ms_per_req') or 0 for x in rows):.3f}")
finally:
    for _, s in servers: s.stop()
    shutil.rmtree(work, ignore_errors=True)
