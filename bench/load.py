"""Bulk-loaded benchmark stores, built once under ``bench/data/<scale>/`` and reused.

A store is written the way the service would see it after a long life: SQLite through the real
adapter (``SqliteMemoryStore.open`` migrates the real schema, ``add_episodes`` in big batches
fires the FTS5 triggers), and every episode's vector written straight into Qdrant Edge with the
hash embedder, so the outbox is emptied rather than drained (the worker starts idle). Text is
generated from a fixed-seed Zipf-distributed vocabulary, so FTS posting lists have realistic
skew: a few words are in most rows, most words in few.

``ready.json`` in a scale's directory marks a finished load; anything else there is rebuilt.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sqlite3
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.embedders.hashing import hash_vector  # noqa: E402
from adapters.qdrant.edge import QdrantEdgeIndex  # noqa: E402
from adapters.sqlite.store import SqliteMemoryStore  # noqa: E402
from domain import writes
from domain.models import NewEpisode, format_timestamp  # noqa: E402
from domain.vectors import COLLECTIONS, VectorPoint, point_payload  # noqa: E402

DATA = ROOT / "bench" / "data"
DIMENSION = 64  # small on purpose: the bench measures the service, not float arithmetic
SEED = 20240601
EPISODES_PER_SESSION = 100
SQL_BATCH = 5_000
VECTOR_BATCH = 2_000
SCALES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}

_COMMON = (
    "the be to of and a in that have i it for not on with he as you do at this but his by from they we"
    " say her she or an will my one all would there their what so up out if about who get which go me"
    " when make can like time no just him know take people into year your good some could them see"
    " other than then now look only come its over think also back after use two how our work first well"
    " way even new want because any these give day most us"
).split()
_TOPICAL = (
    "memory project deadline meeting python database server query index vector search model user"
    " assistant travel flight hotel budget invoice report draft email calendar reminder birthday"
    " recipe garden music guitar concert movie book chapter novel poem article paper research"
    " experiment result graph chart sales customer order shipping refund ticket bug release deploy"
    " kubernetes docker cluster latency throughput benchmark cache queue worker thread lock commit"
    " branch merge review test coverage design pattern interface adapter port domain service api"
    " health doctor appointment exercise running cycling swim diet coffee tea breakfast dinner lunch"
    " weekend holiday family friend sister brother mother father daughter son partner team manager"
    " salary contract lease apartment rent mortgage car repair insurance weather rain snow summer"
    " winter spring autumn paris london berlin tokyo madrid lisbon rome oslo vienna prague"
).split()
_SYLLABLES = "ka lo mi ne ru sa te vo zi pa qua bre dri flo gra ste tri on an el ix or um".split()


def vocabulary(rng: random.Random, size: int = 6_000) -> list[str]:
    """Common words first (the Zipf head), topical words next, invented words for the tail."""
    words = list(dict.fromkeys(_COMMON + _TOPICAL))
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class TextGenerator:
    def __init__(self, seed: int = SEED) -> None:
        self._rng = random.Random(seed)
        self.words = vocabulary(self._rng)
        # Zipf with s = 1: weight 1/rank.
        weights = [1.0 / (rank + 1) for rank in range(len(self.words))]
        total = 0.0
        self._cumulative = []
        for weight in weights:
            total += weight
            self._cumulative.append(total)

    def sentence(self, low: int, high: int) -> str:
        count = self._rng.randint(low, high)
        words = self._rng.choices(self.words, cum_weights=self._cumulative, k=count)
        return " ".join(words).capitalize() + "."

    def queries(self, count: int) -> list[str]:
        """1-3 word queries from the middle of the distribution: they match, but not everything."""
        middle = self.words[60:1_500]
        return [" ".join(self._rng.sample(middle, self._rng.randint(1, 3))) for _ in range(count)]


def scale_dir(scale: str) -> Path:
    return DATA / scale


def manifest(scale: str) -> dict | None:
    marker = scale_dir(scale) / "ready.json"
    return json.loads(marker.read_text()) if marker.is_file() else None


def sessions_for(episodes: int) -> int:
    return max(10, episodes // EPISODES_PER_SESSION)


async def _load_sqlite(path: Path, episodes: int, gen: TextGenerator) -> tuple[int, float]:
    store = SqliteMemoryStore.open(str(path))
    started = time.perf_counter()
    sessions = sessions_for(episodes)
    for number in range(sessions):
        await store.uow.run(lambda tx: writes.create_session(tx, f"bench-session-{number}", {"bench": True}))
    start = datetime(2024, 1, 1, tzinfo=UTC)
    step = timedelta(days=365) / episodes
    batch: list[NewEpisode] = []
    for number in range(episodes):
        # Consecutive episodes share a session for a while, as conversations do.
        session = (number // 20) % sessions + 1
        user = gen.sentence(6, 24)
        batch.append(NewEpisode(
            session_id=session, user_message=user.replace(".", "?"), ai_response=gen.sentence(12, 48),
            token_count=len(user) // 4, metadata={}, created_at=format_timestamp(start + step * number),
        ))
        if len(batch) == SQL_BATCH:
            await store.uow.run(lambda tx: writes.add_episodes(tx, batch))
            batch = []
    if batch:
        await store.uow.run(lambda tx: writes.add_episodes(tx, batch))
    # Vectors are written directly below, so the outbox the adapter filled is already done.
    await store.database.write(lambda conn: conn.execute("DELETE FROM embedding_outbox"))
    await store.close()
    return sessions, time.perf_counter() - started


async def _load_vectors(db_path: Path, qdrant_path: Path) -> tuple[float, float]:
    index = QdrantEdgeIndex(qdrant_path, optimize_every=10**12)
    for name in COLLECTIONS:
        await index.ensure_collection(name, DIMENSION)
    started = time.perf_counter()
    conn = sqlite3.connect(db_path)
    cursor = conn.execute("SELECT id, session_id, user_message, ai_response, created_at FROM episodes ORDER BY id")
    while rows := cursor.fetchmany(VECTOR_BATCH):
        points = [
            VectorPoint(id_, hash_vector(f"{user}\n{ai}", DIMENSION), point_payload(created, session))
            for id_, session, user, ai, created in rows
        ]
        await index.upsert("episodes", points)
    conn.close()
    upserted = time.perf_counter() - started
    await index.optimize("episodes")
    built = time.perf_counter() - started - upserted
    await index.close()
    return upserted, built


def refresh_index(qdrant_path: Path, dimension: int) -> float:
    """Open the shards the way the server will and build what is pending, on the pristine store.

    The adapter writes its HNSW settings over the persisted ones on open, and a changed setting
    makes the next ``optimize()`` rebuild the whole graph; doing it here, once, keeps that out
    of the measured start-up. Takes well under a second when nothing changed.
    """

    async def run() -> None:
        index = QdrantEdgeIndex(qdrant_path)
        for name in COLLECTIONS:
            await index.ensure_collection(name, dimension)
        await index.optimize()
        await index.close()

    started = time.perf_counter()
    asyncio.run(run())
    return round(time.perf_counter() - started, 2)


def ensure_store(scale: str, log=print) -> dict:
    """The manifest of ``scale``'s store, loading it first if it is missing or unfinished."""
    found = manifest(scale)
    if found is not None:
        found["index_refresh_s"] = refresh_index(scale_dir(scale) / "memory.db.qdrant", found["dimension"])
        if found["index_refresh_s"] > 1:
            log(f"  the {scale} vector index was rebuilt for the current HNSW settings"
                f" in {found['index_refresh_s']} s (once; the result is kept)")
        return found
    episodes = SCALES[scale]
    target = scale_dir(scale)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    db_path, qdrant_path = target / "memory.db", target / "memory.db.qdrant"
    log(f"loading the {scale} store ({episodes} episodes) into {target} ...")
    gen = TextGenerator()
    sessions, sql_seconds = asyncio.run(_load_sqlite(db_path, episodes, gen))
    log(f"  sqlite: {sql_seconds:.1f} s ({episodes / sql_seconds:,.0f} episodes/s)")
    upsert_seconds, build_seconds = asyncio.run(_load_vectors(db_path, qdrant_path))
    log(f"  qdrant edge: upsert {upsert_seconds:.1f} s, HNSW build {build_seconds:.1f} s")
    found = {
        "scale": scale, "episodes": episodes, "sessions": sessions, "dimension": DIMENSION, "seed": SEED,
        "load_seconds": {"sqlite": round(sql_seconds, 1), "vector_upsert": round(upsert_seconds, 1),
                         "hnsw_build": round(build_seconds, 1)},
        "loaded_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (target / "ready.json").write_text(json.dumps(found, indent=2))
    return found


def scratch_copy(scale: str) -> Path:
    """A throwaway copy of the pristine store for one run (POSTs must not grow the original)."""
    source, scratch = scale_dir(scale), DATA / f"run-{scale}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    shutil.copy2(source / "memory.db", scratch / "memory.db")
    shutil.copytree(source / "memory.db.qdrant", scratch / "memory.db.qdrant")
    return scratch


if __name__ == "__main__":
    for name in sys.argv[1:] or ["10k"]:
        print(json.dumps(ensure_store(name), indent=2))
