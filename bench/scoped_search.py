"""Scoped vs unscoped hybrid search: ``SearchService.search`` in process over a real
SQLite file and a real Qdrant Edge shard, N episodes spread over U users (2 sessions each).

    .venv/bin/python bench/scoped_search.py --episodes 100000 --users 1000 --queries 200

Each query runs once unscoped and once scoped to a random user (``userId``), alternating, so load
on the shared machine hits both alike. Reports the median and p90 wall time per search and the
hit counts. The owner filter runs inside the index (payload index on ``userId``) and in SQL.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.embedders.hashing import hash_vector  # noqa: E402
from adapters.qdrant.edge import QdrantEdgeIndex  # noqa: E402
from adapters.sqlite.store import SqliteStore  # noqa: E402
from app.config import Settings  # noqa: E402
from app.container import build_container  # noqa: E402
from bench.load import TextGenerator  # noqa: E402
from domain import writes  # noqa: E402
from domain.models import NewEpisode, Owner  # noqa: E402
from domain.record_kinds import EPISODES  # noqa: E402
from domain.retrieval import SearchQuery, SearchService  # noqa: E402
from domain.vectors import COLLECTIONS, VectorPoint  # noqa: E402

DIMENSION = 64


class HashEmbedder:
    dimension = DIMENSION

    async def embed(self, texts):
        return [hash_vector(t, DIMENSION) for t in texts]

    embed_query = embed


async def load(workdir: Path, episodes: int, users: int, gen: TextGenerator):
    store = SqliteStore.open(str(workdir / "memory.db"), "normal")
    sessions = []
    for u in range(users):
        for k in range(2):
            owner = Owner(f"user-{u}", "assistant")
            sessions.append(await store.uow.run(lambda tx: writes.create_session(tx, f"u{u}-s{k}", {}, owner)))
    rng = random.Random(7)
    index = QdrantEdgeIndex(workdir / "qdrant", optimize_every=10**12)
    for name in COLLECTIONS:
        await index.ensure_collection(name, DIMENSION)
    started = time.perf_counter()
    for start in range(0, episodes, 1000):
        batch = [NewEpisode(rng.choice(sessions).id, gen.sentence(6, 20), gen.sentence(6, 20),
                            metadata={"topic": rng.choice(["a", "b", "c"])})
                 for _ in range(min(1000, episodes - start))]
        stored = await store.uow.run(lambda tx: writes.add_episodes(tx, batch))
        await index.upsert(EPISODES.name, [VectorPoint(e.id, hash_vector(e.text, DIMENSION), EPISODES.payload(e))
                                           for e in stored])
    await store.database.write(lambda conn: conn.execute("DELETE FROM embedding_outbox"))
    await index.optimize(EPISODES.name)
    return store, index, time.perf_counter() - started


async def main(args) -> None:
    gen = TextGenerator()
    with tempfile.TemporaryDirectory(prefix="scoped-bench-") as tmp:
        store, index, load_s = await load(Path(tmp), args.episodes, args.users, gen)
        settings = Settings(sqlite_path=str(Path(tmp) / "unused.db"), vector_index="memory", embedder="fake")
        rankers = build_container(settings).rankers()
        service = SearchService(store, index, HashEmbedder(), rankers, "rrf")
        rng = random.Random(11)
        times = {"unscoped": [], "scoped": []}
        hits = {"unscoped": [], "scoped": []}
        for query in gen.queries(args.queries + 10):
            user = f"user-{rng.randrange(args.users)}"
            for label, owner in (("unscoped", Owner()), ("scoped", Owner(user))):
                started = time.perf_counter()
                result = await service.search(SearchQuery(query, 10, owner=owner))
                times[label].append(time.perf_counter() - started)
                hits[label].append(len(result.hits))
        await index.close()
        await store.close()
    print(f"{args.episodes} episodes, {args.users} users x 2 sessions, {args.queries} queries (load {load_s:.0f} s)")
    print("| search | median ms | p90 ms | mean hits |")
    print("|---|---|---|---|")
    for label in times:
        t = sorted(times[label][10:])  # the first 10 warm caches
        print(f"| {label} | {statistics.median(t) * 1e3:.1f} | {t[int(len(t) * 0.9)] * 1e3:.1f} | "
              f"{statistics.mean(hits[label][10:]):.1f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    asyncio.run(main(parser.parse_args()))
