"""The vector index as a cache of SQLite: what it costs and how fast it heals.

    .venv/bin/python bench/index_bench.py                       # 100k vectors, 384-d, 20k bulk load
    .venv/bin/python bench/index_bench.py --n 20000 --bulk 5000 # quick

Three figures, each on this machine in this run:
1. **Stored embeddings**: bytes per record the `embeddings` table adds (dbstat, with its key
   index), float16 (what the service stores, via `encode_vector`) against float32, and the write
   cost per record (encode + INSERT).
2. **Rebuild from stored embeddings**: the episodes shard is deleted and a fresh IndexManager
   rebuilds it from SQLite alone (the embedder is down all along), timed to "consistent"; and the
   time the hash embedder (a floor: any real model is far slower) would have taken to re-embed.
3. **Degraded share during a bulk load**: a real server, default thresholds, episodes posted in
   batches while a thread samples `POST /search` every 200 ms; the share of answers degraded
   because of the index (target 0: maintenance builds a new generation beside the live one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.embedders.hashing import HashEmbedder  # noqa: E402
from adapters.memory.fake_embedder import FakeEmbedder  # noqa: E402
from adapters.qdrant.edge import QdrantEdgeIndex  # noqa: E402
from adapters.sqlite.catalog import SqliteIndexCatalog  # noqa: E402
from adapters.sqlite.store import SqliteMemoryStore  # noqa: E402
from domain import writes
from domain.index_manager import IndexManager  # noqa: E402
from domain.models import NewEpisode  # noqa: E402
from domain.vectors import ModelRef, encode_vector  # noqa: E402
from tests.support.server import ServiceProcess, service_env  # noqa: E402

DIM = 384


async def _fill(path: Path, n: int, encode) -> dict:
    store = SqliteMemoryStore.open(str(path))
    catalog = SqliteIndexCatalog(store.database)
    model = await catalog.model_id(ModelRef("hash", "hash", DIM))
    session = await store.uow.run(lambda tx: writes.create_session(tx, "bench", {}))
    rng = np.random.default_rng(1)
    write_seconds = 0.0
    for start in range(0, n, 5000):
        made = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"note {i}", "ok") for i in range(start, min(n, start + 5000))]))
        vectors = rng.standard_normal((len(made), DIM)).astype(np.float32)
        began = time.perf_counter()
        blobs = [(e.id, encode(v)) for e, v in zip(made, vectors)]
        for chunk in range(0, len(blobs), 256):
            await catalog.store_embeddings("episodes", model, blobs[chunk:chunk + 256])
        write_seconds += time.perf_counter() - began
    size = await store.database.read(lambda c: c.execute(
        "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ('embeddings', 'sqlite_autoindex_embeddings_1')"
    ).fetchone()[0])
    await store.close()
    return {"bytesPerRecord": round(size / n, 1), "writeMicrosPerRecord": round(1e6 * write_seconds / n, 1)}


async def stored_embeddings(workdir: Path, n: int) -> dict:
    return {"float16 (stored)": await _fill(workdir / "service.db", n, lambda v: encode_vector(v.tolist())),
            "float32": await _fill(workdir / "f32.db", n, lambda v: v.astype(np.float32).tobytes())}


async def rebuild(workdir: Path) -> dict:
    db = workdir / "service.db"
    store = SqliteMemoryStore.open(str(db))
    catalog = SqliteIndexCatalog(store.database)
    index = QdrantEdgeIndex(workdir / "shards")
    down = FakeEmbedder(DIM, model="hash")
    down.go_down()  # the rebuild must not need the embedder
    manager = IndexManager(index, catalog, store, down, "hash", check_seconds=0.1)
    # The same model as the stored embeddings: the manager only has to build from them.
    manager.model = ModelRef("hash", "hash", DIM)
    began = time.perf_counter()
    await manager.start()
    manager.run()
    while manager.status()["status"] != "consistent":
        await asyncio.sleep(0.2)
    seconds = time.perf_counter() - began
    points = await manager.count("episodes")
    await manager.close()
    await index.close()
    rows = (await store.operations.counts())["episodes"]
    texts = [f"User: note {i}\nAssistant: ok" for i in range(2000)]
    embedder = HashEmbedder(DIM)
    began = time.perf_counter()
    for start in range(0, len(texts), 64):
        await embedder.embed(texts[start:start + 64])
    per_text = (time.perf_counter() - began) / len(texts)
    await store.close()
    return {"points": points, "rows": rows, "rebuildSeconds": round(seconds, 1),
            "hashReembedSeconds": round(per_text * rows, 1)}


def bulk_load(workdir: Path, episodes: int) -> dict:
    env = service_env(workdir / "bulk" / "memory.db", {"EMBEDDING_DIM": str(DIM)})
    (workdir / "bulk").mkdir()
    samples: list[bool] = []
    stop = threading.Event()
    with ServiceProcess(env, log_dir=workdir / "bulk") as server:
        def sample() -> None:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                while not stop.is_set():
                    answer = http.post("/search", json={"query": "kiwi note"}).json()
                    samples.append(any("index" in w for w in answer.get("warnings", [])))
                    stop.wait(0.2)

        sampler = threading.Thread(target=sample)
        with httpx.Client(base_url=server.url, timeout=60) as http:
            sid = http.post("/sessions", json={"externalId": "bulk"}).json()["id"]
            sampler.start()
            began = time.perf_counter()
            for start in range(0, episodes, 500):
                http.post("/episodes/batch", json={"episodes": [
                    {"sessionId": sid, "userMessage": f"kiwi note {n}", "aiResponse": "ok"}
                    for n in range(start, min(episodes, start + 500))]})
            while http.get("/health").json()["components"]["embeddingBacklog"]["pending"]:
                time.sleep(0.2)
            seconds = time.perf_counter() - began
            # Keep sampling through the maintenance build the load made due (bounded).
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                index = http.get("/health").json()["components"]["vectorIndex"]["index"]
                if index["builds"] and index["status"] == "consistent":
                    break
                time.sleep(0.5)
            builds = index["builds"]
        stop.set()
        sampler.join()
    return {"episodes": episodes, "samples": len(samples), "degradedByIndex": sum(samples),
            "degradedShare": round(sum(samples) / max(1, len(samples)), 4), "builds": builds,
            "loadSeconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="stored embeddings / rebuild size")
    parser.add_argument("--bulk", type=int, default=20_000, help="episodes in the bulk load (0: skip)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="index-bench-"))
    try:
        result = {"n": args.n, "dimension": DIM, "stored": asyncio.run(stored_embeddings(workdir, args.n))}
        result["rebuild"] = asyncio.run(rebuild(workdir))
        if args.bulk:
            result["bulkLoad"] = bulk_load(workdir, args.bulk)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
