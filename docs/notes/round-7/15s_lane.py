"""Round-7 15s: query latency on the in-process model while 4 document calls keep it busy (run from the repo root)."""
import asyncio, time, statistics, sys
sys.path.insert(0, ".")
from adapters.embedders.local import LocalEmbedder
WORDS = "harbour boat kitten budget launch lisbon cello ramen deploy friday meeting tuesday garden river".split()
def text(i, n): return " ".join(WORDS[(i*7+k*3) % len(WORDS)] for k in range(n))
async def main():
    m = LocalEmbedder("all-MiniLM-L6-v2"); await m.embed(["warm"])
    docs = [text(i, 180) for i in range(128)]
    async def worker():
        while not stop: await asyncio.gather(*(m.embed(docs) for _ in range(4)))
    stop = False
    t = asyncio.create_task(worker()); await asyncio.sleep(0.5)
    lat = []
    for i in range(40):
        s = time.perf_counter(); await m.embed_query([text(i, 5)]); lat.append(time.perf_counter() - s)
    stop = True; await t
    lat.sort(); print("query p50 %.1f p90 %.1f max %.1f ms" % (statistics.median(lat)*1000, lat[36]*1000, lat[-1]*1000))
    s = time.perf_counter(); await m.embed(docs[:16]); print("one doc batch %.1f ms" % ((time.perf_counter()-s)*1000))
asyncio.run(main())
