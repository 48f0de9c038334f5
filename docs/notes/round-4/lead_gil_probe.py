import asyncio, random, time, sys
sys.path.insert(0, ".")  # run from the repository root: .venv/bin/python docs/notes/round-4/lead_gil_probe.py
from adapters.qdrant.edge import QdrantEdgeIndex
from domain.vectors import VectorPoint

async def ticker(stop, gaps):
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter(); gaps.append(now - last); last = now

async def main():
    idx = QdrantEdgeIndex("/tmp/gilx", inline_optimize_points=100_000, optimize_every=10**9)
    await idx.ensure_collection("c", 384)
    rnd = random.Random(1)
    batches = [[VectorPoint(i, [rnd.random() for _ in range(384)], {}) for i in range(b*1000, b*1000+1000)] for b in range(20)]
    stop = asyncio.Event(); gaps = []
    t = asyncio.create_task(ticker(stop, gaps))
    await asyncio.sleep(0.2); base = list(gaps); gaps.clear()
    t0 = time.perf_counter()
    for b in batches:
        await idx.upsert("c", b)
    up = time.perf_counter() - t0
    g_up = sorted(gaps); gaps.clear()
    q = [rnd.random() for _ in range(384)]
    t0 = time.perf_counter()
    for _ in range(200):
        await idx.search("c", q, 50)
    se = time.perf_counter() - t0
    g_se = sorted(gaps); gaps.clear()
    stop.set(); await t
    def s(g): return f"n={len(g)} p50={g[len(g)//2]*1e3:.2f}ms p99={g[int(len(g)*.99)]*1e3:.2f}ms max={g[-1]*1e3:.2f}ms"
    print("idle   ", s(sorted(base)))
    print(f"upsert 20x1000 in {up:.2f}s", s(g_up))
    print(f"search 200 (brute, 20k) in {se:.2f}s", s(g_se))
    await idx.close()
asyncio.run(main())
