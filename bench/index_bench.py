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
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from adapters.embedders.hashing import HashEmbedder  # noqa: E402
from adapters.memory.fake_embedder import FakeEmbedder  # noqa: E402
from adapters.qdrant.edge import QdrantEdgeIndex  # noqa: E402
from adapters.sqlite.catalog import SqliteIndexCatalog  # noqa: E402
from adapters.sqlite.store import SqliteStore  # noqa: E402
from domain import writes
from domain.index_manager import IndexManager  # noqa: E402
from domain.models import NewEpisode  # noqa: E402
from domain.vectors import ModelRef, encode_vector  # noqa: E402
from tests.support.server import ServiceProcess, service_env  # noqa: E402

DIM = 384


async def _fill(path: Path, n: int, encode) -> dict:
    store = SqliteStore.open(str(path))
    catalog = SqliteIndexCatalog(store.database)
    model = await catalog.model_id(ModelRef("hash", "hash", DIM))
    session = await store.uow.run(lambda tx: writes.create_session(tx, "bench", {}))
    rng = np.random.default_rng(1)
    write_seconds, pages = 0.0, 0

    async def page_count() -> int:  # the file's pages in use (the bundled SQLite has no dbstat table)
        return await store.database.read(lambda c: c.execute("PRAGMA page_count").fetchone()[0]
                                         - c.execute("PRAGMA freelist_count").fetchone()[0])

    for start in range(0, n, 5000):
        made = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"note {i}", "ok") for i in range(start, min(n, start + 5000))]))
        vectors = rng.standard_normal((len(made), DIM)).astype(np.float32)
        before = await page_count()
        began = time.perf_counter()
        blobs = [(e.id, encode(v)) for e, v in zip(made, vectors)]
        for chunk in range(0, len(blobs), 256):
            await catalog.store_embeddings("episodes", model, blobs[chunk:chunk + 256])
        write_seconds += time.perf_counter() - began
        pages += await page_count() - before  # the pages the embeddings (table and key index) took
    size = pages * await store.database.read(lambda c: c.execute("PRAGMA page_size").fetchone()[0])
    await store.close()
    return {"bytesPerRecord": round(size / n, 1), "writeMicrosPerRecord": round(1e6 * write_seconds / n, 1)}


async def stored_embeddings(workdir: Path, n: int) -> dict:
    return {"float16 (stored)": await _fill(workdir / "service.db", n, lambda v: encode_vector(v.tolist())),
            "float32": await _fill(workdir / "f32.db", n, lambda v: v.astype(np.float32).tobytes())}


async def rebuild(workdir: Path) -> dict:
    db = workdir / "service.db"
    store = SqliteStore.open(str(db))
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


def reembed_rate(sample: int = 512) -> dict:
    """Episodes per second the default embedder (local all-MiniLM-L6-v2, numpy runtime) embeds.

    Measured on ``sample`` bench texts (the same generator as the stores, ``User: ...`` as the
    worker builds them), in batches of 64 like the worker, after one warm-up batch; CPU seconds
    are read too, since wall time on a shared machine depends on the neighbours.
    """
    import resource

    import load
    from adapters.embedders.local import LocalEmbedder
    from app.config import LOCAL_MODEL

    gen = load.TextGenerator(seed=7)
    texts = [f"User: {gen.sentence(6, 24)}\nAssistant: {gen.sentence(12, 48)}" for _ in range(sample)]

    async def run() -> tuple[float, float]:
        embedder = LocalEmbedder(LOCAL_MODEL, None)
        await embedder.embed(texts[:64])  # loads the model, warms the code paths
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        began = time.perf_counter()
        for start in range(0, len(texts), 64):
            await embedder.embed(texts[start:start + 64])
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_SELF)
        return wall, (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)

    loadavg = round(os.getloadavg()[0], 2)
    wall, cpu = asyncio.run(run())
    return {"model": LOCAL_MODEL, "runtime": "numpy", "sample": sample, "seconds": round(wall, 2),
            "cpu_seconds": round(cpu, 2), "per_s": round(sample / wall, 1), "per_cpu_s": round(sample / cpu, 1),
            "loadavg_1m_before": loadavg, "loadavg_1m_after": round(os.getloadavg()[0], 2)}


def extrapolate(rate: dict, counts: dict[str, int]) -> dict:
    """Re-embedding time at each size from the sampled rate: an extrapolation, not a run."""
    return {scale: {"episodes": n, "reembed_seconds_extrapolated": round(n / rate["per_s"], 1),
                    "reembed_cpu_seconds_extrapolated": round(n / rate["per_cpu_s"], 1)}
            for scale, n in counts.items()}


def _index_status(http: httpx.Client) -> dict:
    """The vectorIndex component of /health; under load its check may answer without details."""
    try:
        component = http.get("/health").json()["components"]
    except (httpx.HTTPError, ValueError) as error:
        return {"error": repr(error)}
    vector = component.get("vectorIndex", {})
    index = vector.get("index")
    if index is None:
        return {"status": None, "component": vector, "pending": component.get("embeddingBacklog", {}).get("pending")}
    episodes = index.get("collections", {}).get("episodes", {})
    return {"status": index.get("status"), "builds": index.get("builds"), "points": episodes.get("points"),
            "rows": episodes.get("rows"), "state": episodes.get("state"), "progress": episodes.get("progress"),
            "pending": component.get("embeddingBacklog", {}).get("pending")}


def bulk_load(workdir: Path, episodes: int, batch: int = 500, build_wait_s: float = 1_200) -> dict:
    """0 -> ``episodes`` through ``POST /episodes/batch`` with ``POST /search`` sampled every 200 ms.

    Every sample is kept: its latency, whether it was degraded and each warning. A degraded answer
    counts against index maintenance when its warning names the vector index (the only legs that
    can fail here: the embedder is the in-process hash one). The vectorIndex component of /health
    is sampled too (state, builds, progress), so a degraded sample can be matched with what the
    index did. After the load it keeps sampling until a maintenance build has switched and the
    index is consistent (at most ``build_wait_s``). Whatever happens, what was sampled is returned.
    """
    env = service_env(workdir / "bulk" / "memory.db", {"EMBEDDING_DIM": str(DIM), "LOG_LEVEL": "info"})
    (workdir / "bulk").mkdir()
    samples: list[dict] = []
    health: list[dict] = []
    stop = threading.Event()
    loadavg = round(os.getloadavg()[0], 2)
    t0 = time.perf_counter()
    out: dict = {"episodes": episodes, "batch": batch}
    with ServiceProcess(env, log_dir=workdir / "bulk") as server:
        def sample() -> None:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                while not stop.is_set():
                    began = time.perf_counter()
                    try:
                        response = http.post("/search", json={"query": "kiwi note", "limit": 10})
                        answer, status = response.json(), response.status_code
                    except (httpx.HTTPError, ValueError) as error:
                        answer, status = {"degraded": True, "warnings": [f"request failed: {error!r}"]}, None
                    warnings = answer.get("warnings", [])
                    samples.append({"t": round(time.perf_counter() - t0, 2), "ms": round(1e3 * (time.perf_counter() - began), 1),
                                    "status": status, "degraded": bool(answer.get("degraded")),
                                    "index": any("index" in w for w in warnings), "warnings": warnings})
                    stop.wait(0.2)

        sampler = threading.Thread(target=sample)
        try:
            with httpx.Client(base_url=server.url, timeout=120) as http:
                sid = http.post("/sessions", json={"externalId": "bulk"}).json()["id"]
                t0 = time.perf_counter()
                sampler.start()
                for start in range(0, episodes, batch):
                    http.post("/episodes/batch", json={"episodes": [
                        {"sessionId": sid, "userMessage": f"kiwi note {n}", "aiResponse": "ok"}
                        for n in range(start, min(episodes, start + batch))]}).raise_for_status()
                    if (start // batch) % 10 == 0:
                        health.append({"t": round(time.perf_counter() - t0, 1), "posted": start + batch,
                                       **_index_status(http)})
                out["postSeconds"] = round(time.perf_counter() - t0, 1)
                while (now := _index_status(http)).get("pending") != 0:
                    time.sleep(0.5)
                out["drainedSeconds"] = round(time.perf_counter() - t0, 1)
                # Keep sampling through the maintenance build the load made due (bounded).
                deadline = time.monotonic() + build_wait_s
                while time.monotonic() < deadline:
                    now = _index_status(http)
                    if len(health) < 2_000 and (not health or health[-1].get("state") != now.get("state")
                                                or time.perf_counter() - t0 - health[-1]["t"] > 30):
                        health.append({"t": round(time.perf_counter() - t0, 1), **now})
                    # Above the inline threshold (5,000 points) the load makes a build due: wait for it.
                    if now.get("status") == "consistent" and (now.get("builds") or episodes <= 5_000):
                        break
                    time.sleep(0.5)
                out["settledSeconds"] = round(time.perf_counter() - t0, 1)
                out["final"] = now
        except Exception as error:  # report what was sampled up to here
            out["error"] = repr(error)
        finally:
            stop.set()
            if sampler.is_alive():
                sampler.join()
        status_path = Path(f"/proc/{server.pid}/status")
        if status_path.exists():
            out["peakRssMb"] = next((int(ln.split()[1]) // 1024 for ln in status_path.read_text().splitlines()
                                     if ln.startswith("VmHWM")), None)
        out["serverLogIndexLines"] = [
            ln[:300] for f in sorted((workdir / "bulk").glob("server-*.std*"))
            for ln in f.read_text(errors="replace").splitlines() if "nexusai.index" in ln][-40:]
    degraded = [x for x in samples if x["degraded"]]
    by_index = [x for x in samples if x["index"]]
    ms = sorted(x["ms"] for x in samples)
    out.update({
        "samples": len(samples), "degradedByIndex": len(by_index),
        "degradedShare": round(len(by_index) / max(1, len(samples)), 4), "degradedAny": len(degraded),
        "degradedWarnings": sorted({w for x in degraded for w in x["warnings"]})[:10],
        "degradedAt": [(x["t"], x["warnings"][:1]) for x in degraded][:30],
        "searchMsP50": ms[len(ms) // 2] if ms else None, "searchMsP99": ms[int(len(ms) * 0.99)] if ms else None,
        "builds": (out.get("final") or {}).get("builds"), "points": (out.get("final") or {}).get("points"),
        "loadSeconds": out.get("drainedSeconds"), "health": health,
        "loadavg_1m_before": loadavg, "loadavg_1m_after": round(os.getloadavg()[0], 2)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="stored embeddings / rebuild size (0: skip)")
    parser.add_argument("--bulk", type=int, default=20_000, help="episodes in the bulk load (0: skip)")
    parser.add_argument("--reembed-sample", type=int, default=0,
                        help="texts to time the default local embedder on (0: skip)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="index-bench-"))
    result: dict = {"command": " ".join(["index_bench.py", *sys.argv[1:]]), "dimension": DIM}

    def save() -> None:
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=2))

    try:
        if args.n:
            result.update(n=args.n, stored=asyncio.run(stored_embeddings(workdir, args.n)))
            result["rebuild"] = asyncio.run(rebuild(workdir))
            save()
        if args.reembed_sample:
            result["reembed"] = reembed_rate(args.reembed_sample)
            save()
        if args.bulk:
            result["bulkLoad"] = bulk_load(workdir, args.bulk)
            save()
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
