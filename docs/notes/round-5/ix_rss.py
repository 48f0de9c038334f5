"""RSS per process of `memory-service serve` with the default embedder (local all-MiniLM-L6-v2),
WORKERS=N, after the model loaded, one write and 20 searches (from round 4's 15p_rss.py).

    .venv/bin/python docs/notes/round-5/ix_rss.py N [TREE]

TREE: a checkout whose ``app`` package runs the server (e.g. ``git archive main``), default this one."""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
from run import free_port, process_tree  # noqa: E402

workers = sys.argv[1]
tree = sys.argv[2] if len(sys.argv) > 2 else None
d = tempfile.mkdtemp(prefix="ix-rss-")
port = free_port()
env = {**os.environ, "SQLITE_PATH": d + "/m.db", "PORT": str(port), "HOST": "127.0.0.1", "WORKERS": workers,
       "HF_HUB_OFFLINE": "1", "LOG_LEVEL": "warning"}
if tree:
    env["PYTHONPATH"] = tree
for k in ("EMBEDDER", "EMBEDDING_DIM"):
    env.pop(k, None)
p = subprocess.Popen([str(ROOT / ".venv/bin/memory-service"), "serve"], env=env, cwd=d,
                     stdout=open(d + "/log", "wb"), stderr=subprocess.STDOUT)
try:
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            h = httpx.get(url + "/health", timeout=5).json()
            if h["components"]["embedder"]["status"] == "ok" and h["components"]["vectorIndex"]["status"] == "ok":
                break
        except Exception:
            pass
        time.sleep(0.5)
    with httpx.Client(base_url=url, timeout=30) as c:
        sid = c.post("/sessions", json={"externalId": "r"}).json()["id"]
        c.post("/episodes", json={"sessionId": sid, "userMessage": "hello there", "aiResponse": "hi"})
    for _ in range(20):  # fresh connections: every worker embeds a query
        with httpx.Client(base_url=url, timeout=30) as c:
            c.post("/search", json={"query": "hello"})
    time.sleep(3)
    total = 0.0
    for pid in sorted(process_tree(p.pid)):
        rss = int(next(line for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS")).split()[1]) / 1024
        total += rss
        name = open(f"/proc/{pid}/comm").read().strip()
        cmd = open(f"/proc/{pid}/cmdline").read().replace("\0", " ")[:60]
        print(pid, f"{rss:.0f} MB", name, cmd)
    print(f"total {total:.0f} MB (WORKERS={workers}, tree {tree or 'this'})")
finally:
    p.terminate()
    p.wait(60)
