"""Qdrant Edge vs qdrant-client local mode, through the service's own VectorIndex adapters.

    python bench/vector_bench.py --sizes 10000,100000 --dim 768

For each size: upsert rate (batches like the embedding worker's), the time for Edge to finish
building its HNSW index, search latency p50/p99 (one client, sequential), and recall@10 against
exact brute-force search in numpy. The data are synthetic clustered vectors (embeddings are
clustered, uniform noise is not); queries are fresh draws from the same clusters. Prints a
table and writes JSON under bench/results/. A benchmark, not a test: never run by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.qdrant.edge import QdrantEdgeIndex  # noqa: E402
from adapters.qdrant.server import QdrantServerIndex  # noqa: E402
from domain.models import format_timestamp  # noqa: E402
from domain.vectors import VectorPoint, point_payload  # noqa: E402

COLLECTION = "episodes"
K = 10


def make_data(n: int, dim: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n // 100, 8), dim)).astype(np.float32)

    def draw(count: int) -> np.ndarray:
        picks = rng.integers(0, len(centres), count)
        return centres[picks] + 0.6 * rng.standard_normal((count, dim)).astype(np.float32)

    return draw(n), draw(queries)


def exact_top_k(data: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    truth = []
    for q in queries:
        scores = unit @ (q / np.linalg.norm(q))
        top = np.argpartition(-scores, K)[:K]
        truth.append({int(i) + 1 for i in top})  # point ids are row + 1
    return truth


async def run_one(name: str, index, data: np.ndarray, queries: np.ndarray, truth, batch: int) -> dict:
    dim = data.shape[1]
    await index.ensure_collection(COLLECTION, dim)
    stamp = format_timestamp(datetime.now(UTC))
    started = time.perf_counter()
    for start in range(0, len(data), batch):
        rows = data[start : start + batch]
        points = [
            VectorPoint(start + i + 1, row.tolist(), point_payload(stamp, (start + i) % 50))
            for i, row in enumerate(rows)
        ]
        await index.upsert(COLLECTION, points)
    upsert_s = time.perf_counter() - started
    started = time.perf_counter()
    if isinstance(index, QdrantEdgeIndex):
        await index.optimize(COLLECTION)  # finish the HNSW build before measuring search
    index_s = time.perf_counter() - started
    assert await index.count(COLLECTION) == len(data)
    latencies, hits_found = [], 0
    for q, want in zip(queries, truth, strict=True):
        t = time.perf_counter()
        hits = await index.search(COLLECTION, q.tolist(), K)
        latencies.append(time.perf_counter() - t)
        hits_found += len(want & {h.id for h in hits})
    await index.close()
    latencies.sort()
    return {
        "adapter": name,
        "size": len(data),
        "dim": dim,
        "upsert_s": round(upsert_s, 3),
        "upsert_per_s": round(len(data) / upsert_s, 1),
        "index_build_s": round(index_s, 3),
        "search_p50_ms": round(1000 * statistics.median(latencies), 3),
        "search_p99_ms": round(1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 3),
        "recall_at_10": round(hits_found / (K * len(queries)), 4),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000", help="comma-separated point counts")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256, help="points per upsert call")
    parser.add_argument("--local-max", type=int, default=100_000, help="skip local mode above this size")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    rows: list[dict] = []
    skipped: list[str] = []
    for size in [int(s) for s in args.sizes.split(",") if s]:
        data, queries = make_data(size, args.dim, args.queries, args.seed)
        truth = exact_top_k(data, queries)
        with tempfile.TemporaryDirectory(prefix="vector-bench-") as tmp:
            rows.append(
                await run_one("qdrant-edge", QdrantEdgeIndex(Path(tmp)), data, queries, truth, args.batch)
            )
            print_row(rows[-1])
        if size <= args.local_max:
            rows.append(
                await run_one("client-local", QdrantServerIndex.in_memory(), data, queries, truth, args.batch)
            )
            print_row(rows[-1])
        else:
            skipped.append(f"client-local at {size} (above --local-max)")

    print()
    print_table(rows)
    for note in skipped:
        print("skipped:", note)
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    target = out / f"vector_bench-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    target.write_text(
        json.dumps(
            {
                "command": " ".join(["python", "bench/vector_bench.py", *sys.argv[1:]]),
                "machine": {"python": platform.python_version(), "platform": platform.platform()},
                "queries": args.queries,
                "batch": args.batch,
                "results": rows,
                "skipped": skipped,
            },
            indent=2,
        )
    )
    print(f"written {target}")


COLUMNS = [
    ("adapter", "adapter", 13),
    ("size", "size", 8),
    ("upsert_per_s", "upsert/s", 10),
    ("index_build_s", "index s", 8),
    ("search_p50_ms", "p50 ms", 8),
    ("search_p99_ms", "p99 ms", 8),
    ("recall_at_10", "recall@10", 9),
]


def print_row(row: dict) -> None:
    print("  ".join(f"{k}={row[k]}" for k, _, _ in COLUMNS), flush=True)


def print_table(rows: list[dict]) -> None:
    print(" | ".join(title.ljust(width) for _, title, width in COLUMNS))
    print("-+-".join("-" * width for _, _, width in COLUMNS))
    for row in rows:
        print(" | ".join(str(row[key]).ljust(width) for key, _, width in COLUMNS))


if __name__ == "__main__":
    asyncio.run(main())
