"""In-process CPU per request of the seed routes: the ASGI app called directly (no server, no sockets).
usage: asgi_micro.py <worktree> [n] [rounds]"""
import asyncio, json, os, sys, tempfile, time, random
tree = sys.argv[1]; N = int(sys.argv[2]) if len(sys.argv) > 2 else 3000; ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
sys.path.insert(0, tree); os.chdir(tree)
os.environ.update({"EMBEDDER": "hash", "EMBEDDING_DIM": "384", "VECTOR_INDEX": "edge", "LOG_LEVEL": "warning",
                   "SQLITE_PATH": tempfile.mkdtemp(prefix="15p-micro-") + "/m.db", "HF_HUB_OFFLINE": "1"})
from app.config import load_settings
from app.logs import configure
from app.main import create_app
s = load_settings(dotenv=None)
configure(s.log_level, s.log_format)
app = create_app(s)
random.seed(1)

async def call(method, path, query=b"", body=b""):
    headers = [(b"host", b"x"), (b"user-agent", b"wrk")]
    if body:
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": query, "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2), "state": {}}
    sent = []
    done = False
    async def receive():
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
    async def send(m):
        sent.append(m)
    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

async def main():
    lq_in, lq_out = asyncio.Queue(), asyncio.Queue()
    await lq_in.put({"type": "lifespan.startup"})
    life = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, lq_in.get, lq_out.put))
    print((await lq_out.get())["type"])
    st, b = await call("POST", "/sessions", body=json.dumps({"externalId": "m"}).encode())
    sid = json.loads(b)["id"]
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()
    eps = [{"sessionId": sid, "userMessage": " ".join(random.choices(words, k=12)), "aiResponse": " ".join(random.choices(words, k=20))} for _ in range(400)]
    st, b = await call("POST", "/episodes/batch", body=json.dumps({"episodes": eps}).encode())
    assert st == 201, (st, b)
    ids = [e["id"] for e in json.loads(b)]
    await asyncio.sleep(2)
    post_body = json.dumps({"sessionId": sid, "userMessage": "alpha bravo charlie", "aiResponse": "delta echo"}).encode()
    routes = {
        "GET /episodes/:id": lambda: call("GET", f"/episodes/{random.choice(ids)}"),
        "GET /sessions/:id/episodes": lambda: call("GET", f"/sessions/{sid}/episodes", b"limit=20"),
        "GET /episodes/search": lambda: call("GET", "/episodes/search", b"q=" + random.choice(words).encode()),
        "POST /episodes": lambda: call("POST", "/episodes", body=post_body),
    }
    only = os.environ.get("ONLY")
    if only:
        routes = {k: v for k, v in routes.items() if any(o in k for o in only.split(","))}
    for r in range(ROUNDS):
        for name, fn in routes.items():
            st, _ = await fn()
            assert st < 300, (name, st)
            c0 = time.process_time()
            for _ in range(N):
                await fn()
            c1 = time.process_time()
            print(f"round {r} {name:28} {1e6 * (c1 - c0) / N:7.1f} us CPU/req (process, all threads)", flush=True)
    await lq_in.put({"type": "lifespan.shutdown"})
    await life

asyncio.run(main())
