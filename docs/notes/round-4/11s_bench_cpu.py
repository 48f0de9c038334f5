"""CPU-ms per request of the service process (utime+stime from /proc), main tree vs this branch, alternated."""
import os, subprocess, sys, time, tempfile, httpx
TICK = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / TICK
def run(tree, port, n):
    d = tempfile.mkdtemp()
    env = {**os.environ, "SQLITE_PATH": d + "/m.db", "EMBEDDER": "hash", "EMBEDDING_DIM": "384", "PORT": str(port),
           "LOG_LEVEL": "warning", "HF_HUB_OFFLINE": "1"}
    p = subprocess.Popen([tree + "/.venv/bin/python", "-c", "import sys; from app.cli import main; sys.argv=['memory-service','serve']; main()"],
                         cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, timeout=30) as c:
        for _ in range(300):
            try:
                if c.get("/health/live").status_code == 200: break
            except httpx.HTTPError: pass
            time.sleep(0.1)
        sid = c.post("/sessions", json={"externalId": "b"}).json()["id"]
        out = {}
        for name, call in [
            ("POST /episodes", lambda i: c.post("/episodes", json={"sessionId": sid, "userMessage": f"hello {i}", "aiResponse": "world", "metadata": {"k": i}})),
            ("GET /episodes/1", lambda i: c.get("/episodes/1")),
            ("GET /episodes?limit=20", lambda i: c.get("/episodes", params={"limit": "20", "order": "desc"})),
            ("PATCH /episodes/1", lambda i: c.patch("/episodes/1", json={"tokenCount": i})),
        ]:
            for i in range(50): call(i)  # warm
            before = cpu(p.pid)
            for i in range(n):
                r = call(i); assert r.status_code < 300, r.text
            out[name] = (cpu(p.pid) - before) / n
    p.terminate(); p.wait()
    return out
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
res = {}
for rnd in range(2):
    for label, tree, port in (("main", "/tmp/11s-main", 18711), ("11s", "/work/wt-11s", 18712)):
        for k, v in run(tree, port, n).items():
            res.setdefault(k, {}).setdefault(label, []).append(v)
print("load average:", open("/proc/loadavg").read().strip())
for k, v in res.items():
    m, s = sum(v["main"]) / len(v["main"]), sum(v["11s"]) / len(v["11s"])
    print(f"{k:24s} main {m:.3f} ms  11s {s:.3f} ms  ratio {s/m:.2f}  (runs: {[round(x,3) for x in v['main']]} / {[round(x,3) for x in v['11s']]})")
