"""RSS per process of `memory-service serve` with the default embedder, WORKERS=N, after the model loaded."""
import os, subprocess, sys, tempfile, time, httpx
sys.path.insert(0, "/work/wt-15p/bench")
from run import process_tree, free_port
workers = sys.argv[1]
d = tempfile.mkdtemp(prefix="15p-rss-")
port = free_port()
env = {**os.environ, "SQLITE_PATH": d + "/m.db", "PORT": str(port), "HOST": "127.0.0.1", "WORKERS": workers,
       "HF_HUB_OFFLINE": "1", "LOG_LEVEL": "warning"}
for k in ("EMBEDDER", "EMBEDDING_DIM"):
    env.pop(k, None)
p = subprocess.Popen(["/work/wt-15p/.venv/bin/memory-service", "serve"], env=env, stdout=open(d + "/log", "wb"), stderr=subprocess.STDOUT)
try:
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            h = httpx.get(url + "/health", timeout=5).json()
            if h["components"]["embedder"]["status"] == "ok":
                break
        except Exception:
            pass
        time.sleep(0.5)
    with httpx.Client(base_url=url, timeout=30) as c:  # make every worker embed a query
        sid = c.post("/sessions", json={"externalId": "r"}).json()["id"]
        c.post("/episodes", json={"sessionId": sid, "userMessage": "hello there", "aiResponse": "hi"})
    for _ in range(20):
        with httpx.Client(base_url=url, timeout=30) as c:
            c.post("/search", json={"query": "hello"})
    time.sleep(2)
    for pid in process_tree(p.pid):
        rss = next(l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")).split()[1]
        cmd = open(f"/proc/{pid}/cmdline").read().replace("\0", " ")[:70]
        print(pid, f"{int(rss)/1024:.0f} MB", cmd)
finally:
    p.terminate(); p.wait(60)
