"""In-process CPU per request on the peer bench's corpus (100 sessions x 200 episodes, load.TextGenerator).
usage: micro.py <tree> [n] [rounds]   env: ONLY=route-substrings, CONC=concurrent tasks, PROF=file.prof (cProfile)
POST's CPU includes draining the embedding backlog (the worker runs in this process)."""
import asyncio, json, os, sys, tempfile, time, random, cProfile
tree = sys.argv[1]; N = int(sys.argv[2]) if len(sys.argv) > 2 else 2000; ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
CONC = int(os.environ.get("CONC", "1"))
sys.path.insert(0, tree); sys.path.insert(0, tree + "/bench"); os.chdir(tree)
db_dir = os.environ.get("DB_DIR") or tempfile.mkdtemp(prefix="15q-micro-")
os.environ.update({"EMBEDDER": "hash", "EMBEDDING_DIM": "384", "VECTOR_INDEX": "edge", "LOG_LEVEL": "warning",
                   "SQLITE_PATH": db_dir + "/m.db", "HF_HUB_OFFLINE": "1"})
from app.config import load_settings
from app.logs import configure
from app.main import create_app
import load
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

async def backlog():
    st, b = await call("GET", "/health")
    return json.loads(b)["components"]["embeddingBacklog"]["pending"]

async def drain():
    while await backlog():
        await asyncio.sleep(0.02)

async def main():
    lq_in, lq_out = asyncio.Queue(), asyncio.Queue()
    await lq_in.put({"type": "lifespan.startup"})
    life = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, lq_in.get, lq_out.put))
    print((await lq_out.get())["type"])
    gen = load.TextGenerator(seed=15)
    st, b = await call("GET", "/sessions/1")
    if st == 404:
        for n in range(100):
            st, b = await call("POST", "/sessions", body=json.dumps({"externalId": f"peer-bench-{n}"}).encode())
            sid = json.loads(b)["id"]
            eps = [{"sessionId": sid, "userMessage": gen.sentence(6, 24), "aiResponse": gen.sentence(12, 48)} for _ in range(200)]
            st, b = await call("POST", "/episodes/batch", body=json.dumps({"episodes": eps}).encode())
            assert st == 201, (st, b)
        await drain()
        await asyncio.sleep(5)
    qgen = load.TextGenerator(seed=16)
    queries = [q.encode() for q in qgen.queries(2000)]
    words = qgen.words[:3000]
    from urllib.parse import quote
    def sentence(lo, hi):
        return " ".join(words[int(random.random() ** 2 * len(words))] for _ in range(random.randint(lo, hi)))
    def post():
        body = json.dumps({"sessionId": random.randint(1, 100), "userMessage": sentence(6, 24), "aiResponse": sentence(12, 48)}).encode()
        return call("POST", "/episodes", body=body)
    routes = {
        "GET /episodes/:id": lambda: call("GET", f"/episodes/{random.randint(1, 20000)}"),
        "GET /sessions/:id/episodes": lambda: call("GET", f"/sessions/{random.randint(1, 100)}/episodes", b"limit=20"),
        "GET /episodes/search": lambda: call("GET", "/episodes/search", b"q=" + quote(random.choice(queries)).encode()),
        "POST /episodes": post,
    }
    only = os.environ.get("ONLY")
    if only:
        routes = {k: v for k, v in routes.items() if any(o in k for o in only.split(","))}
    prof = cProfile.Profile() if os.environ.get("PROF") else None
    async def worker(fn, k):
        for _ in range(k):
            st, _ = await fn()
    for r in range(ROUNDS):
        for name, fn in routes.items():
            st, _ = await fn()
            assert st < 300, (name, st)
            if prof: prof.enable()
            c0 = time.process_time(); w0 = time.perf_counter()
            await asyncio.gather(*(worker(fn, N // CONC) for _ in range(CONC)))
            if name.startswith("POST"):
                await drain()
            c1 = time.process_time(); w1 = time.perf_counter()
            if prof: prof.disable()
            print(f"round {r} {name:28} {1e6 * (c1 - c0) / N:7.1f} us CPU/req  wall {1e6 * (w1 - w0) / N:7.1f} us/req  load {os.getloadavg()[0]:.1f}", flush=True)
    if prof:
        prof.dump_stats(os.environ["PROF"])
    await lq_in.put({"type": "lifespan.shutdown"})
    await life

asyncio.run(main())
