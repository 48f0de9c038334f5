"""Round-7 15s: document throughput of the numpy model per TURN_TOKENS budget (run from the repo root)."""
import asyncio, time, sys
sys.path.insert(0, ".")
import adapters.embedders.local as L
from adapters.embedders.local import LocalEmbedder
WORDS = "harbour boat kitten budget launch lisbon cello ramen deploy friday meeting tuesday garden river".split()
def text(i, n): return " ".join(WORDS[(i*7+k*3) % len(WORDS)] for k in range(n))
async def main():
    m = LocalEmbedder("all-MiniLM-L6-v2"); await m.embed(["warm"])
    for n in (180, 30, 12):
        docs = [text(i, n) for i in range(128)]
        for budget in (1024, 256, 512, 1024, 256, 512):
            L.TURN_TOKENS = budget
            s = time.perf_counter(); await m.embed(docs); print(n, "words budget", budget, "%.2f s" % (time.perf_counter()-s), flush=True)
asyncio.run(main())
