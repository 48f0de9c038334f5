"""Per-route server CPU ms/request (whole process tree) for the seed routes; optional py-spy.
usage: prof.py <worktree> [--workers N] [--profile DIR] [--duration S] [--routes a,b]"""
import argparse, os, subprocess, sys, tempfile, time, json
from pathlib import Path
ap = argparse.ArgumentParser()
ap.add_argument("tree"); ap.add_argument("--workers", default="1"); ap.add_argument("--profile")
ap.add_argument("--duration", type=float, default=5); ap.add_argument("--sessions", type=int, default=20)
ap.add_argument("--routes", default="post,get,page,search8,search1"); ap.add_argument("--env", default="")
a = ap.parse_args()
tree = Path(a.tree)
sys.path.insert(0, str(tree / "bench"))
os.chdir(tree)
import load, peer
from run import Server, Wrk, ensure_wrk, cpu_seconds, process_tree
ROUTES = {"post": ("post_episode.lua", 32), "get": ("get_episode.lua", 32), "page": ("session_episodes.lua", 32),
          "search8": ("keyword_search.lua", 8), "search1": ("keyword_search.lua", 1)}
peer.SESSIONS = a.sessions
sessions = peer.corpus()[: a.sessions]
gen = load.TextGenerator(seed=16)
work = Path(tempfile.mkdtemp(prefix="15p-prof-"))
qf, wf = work / "q.txt", work / "w.txt"
qf.write_text("\n".join(gen.queries(2000)) + "\n"); wf.write_text("\n".join(gen.words[:3000]) + "\n")
wrk = Wrk(ensure_wrk(), {"BENCH_MAX_ID": str(a.sessions * 200), "BENCH_SESSIONS": str(a.sessions),
                         "BENCH_QUERIES": str(qf), "BENCH_WORDS": str(wf)})
env = {"WORKERS": a.workers}
for kv in filter(None, a.env.split(",")):
    k, v = kv.split("="); env[k] = v
srv = Server(work, env)
try:
    peer.fill_project(srv.url, sessions)
    srv.wait_for_backlog(300)
    wrk.run(srv.url, "get_episode.lua", 8, 2)
    out = {}
    for name in a.routes.split(","):
        script, conns = ROUTES[name]
        spy = None
        if a.profile:
            Path(a.profile).mkdir(parents=True, exist_ok=True)
            pids = process_tree(srv.pid)
            target = pids[-1] if len(pids) > 1 else pids[0]
            spy = subprocess.Popen([str(tree / ".venv/bin/py-spy"), "record", "--pid", str(srv.pid), "--subprocesses",
                                    "--duration", str(int(a.duration)), "--rate", "250", "--format", "raw", "--nonblocking",
                                    "-o", f"{a.profile}/{name}.txt"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
        row = wrk.run(srv.url, script, conns, a.duration, srv.pid)
        if spy: spy.wait(60)
        if script == "post_episode.lua":
            srv.wait_for_backlog(120)
        out[name] = row
        print(f"{name:8} c{conns:<3} {row['req_per_s']:8.0f} req/s  p50 {row['p50_ms']:6.2f} ms  cpu {row['server_cpu_ms_per_req']} ms/req  load {row['loadavg_1m_after']}", flush=True)
finally:
    srv.stop()
