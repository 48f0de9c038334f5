"""Bulk-loaded benchmark stores, built once under ``bench/data/<scale>/`` and reused.

A store is written the way the service would see it after a long life: SQLite through the real
adapter (``SqliteStore.open`` migrates the real schema, ``add_episodes`` in big batches
fires the FTS5 triggers); every episode's embedding (hash embedder at 384-d, the default model's
size) stored in the ``embeddings`` table as the worker stores it, so the outbox is emptied rather
than drained (the worker starts idle); then the vector index is built by the service's own
``IndexManager`` from those stored embeddings alone, the embedder down, and that build is timed
(the "rebuild from stored embeddings" figure, recorded in ``ready.json``). Text is
generated from a fixed-seed Zipf-distributed vocabulary, so FTS posting lists have realistic
skew: a few words are in most rows, most words in few.

``ready.json`` in a scale's directory marks a finished load; anything else there is rebuilt.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.embedders.hashing import hash_vector  # noqa: E402
from adapters.memory.fake_embedder import FakeEmbedder  # noqa: E402
from adapters.qdrant.edge import QdrantEdgeIndex  # noqa: E402
from adapters.sqlite.catalog import SqliteIndexCatalog  # noqa: E402
from adapters.sqlite.driver import sqlite3  # noqa: E402
from adapters.sqlite.store import SqliteStore  # noqa: E402
from domain import writes  # noqa: E402
from domain.index_manager import IndexManager  # noqa: E402
from domain.models import NewEpisode, format_timestamp  # noqa: E402
from domain.vectors import ModelRef  # noqa: E402

DATA = ROOT / "bench" / "data"
# The default model's size (all-MiniLM-L6-v2), so index sizes, HNSW builds and searches are
# those of a real deployment; the vectors come from the hash embedder at that size.
DIMENSION = 384
MODEL = ModelRef("hash", "hash", DIMENSION)  # what EMBEDDER=hash EMBEDDING_DIM=384 records
LAYOUT = 2  # 2: stored embeddings + an index generation built from them (1: legacy shards, 64-d)
EMBED_BATCH = 20_000
SEED = 20240601
EPISODES_PER_SESSION = 100
SQL_BATCH = 5_000
SCALES = {"10k": 10_000, "100k": 100_000, "300k": 300_000, "1m": 1_000_000}

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
    store = SqliteStore.open(str(path))
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


def _embed_chunk(rows: list[tuple[int, str]]) -> list[tuple[int, bytes]]:
    """Hash-embed one chunk and encode it as the store keeps it (unit float16, little-endian).

    numpy's float16 cast rounds like ``struct``'s ``'e'`` (half to even), so the blobs equal
    ``domain.vectors.encode_vector``'s; it is only ~50x faster, which matters at 1M rows.
    """
    out = []
    for ref_id, text in rows:
        vector = np.asarray(hash_vector(text, DIMENSION), dtype=np.float64)
        vector /= np.linalg.norm(vector)
        out.append((ref_id, vector.astype("<f2").tobytes()))
    return out


async def _model_id(db_path: Path) -> int:
    store = SqliteStore.open(str(db_path))
    try:
        return await SqliteIndexCatalog(store.database).model_id(MODEL)
    finally:
        await store.close()


def _store_embeddings(db_path: Path, log) -> float:
    """Every episode's embedding into the ``embeddings`` table, as the worker would have stored it."""
    model_id = asyncio.run(_model_id(db_path))
    started = time.perf_counter()
    reader, writer = sqlite3.connect(db_path), sqlite3.connect(db_path)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA synchronous=OFF")
    # Resumable: a load stopped here goes on after the last stored embedding.
    after = reader.execute("SELECT coalesce(max(ref_id), 0) FROM embeddings WHERE collection = 'episodes'").fetchone()[0]
    cursor = reader.execute("SELECT id, user_message, ai_response FROM episodes WHERE id > ? ORDER BY id", (after,))
    done = after
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        while rows := cursor.fetchmany(EMBED_BATCH):
            texts = [(i, f"User: {u}\nAssistant: {a}") for i, u, a in rows]
            chunks = [texts[k:k + 1_000] for k in range(0, len(texts), 1_000)]
            blobs = [blob for part in pool.map(_embed_chunk, chunks) for blob in part]
            with writer:
                writer.executemany(
                    "INSERT OR REPLACE INTO embeddings(collection, ref_id, model_id, vector) VALUES ('episodes', ?, ?, ?)",
                    [(i, model_id, b) for i, b in blobs])
            done += len(rows)
            if done % 100_000 == 0:
                log(f"  embeddings: {done:,} ({time.perf_counter() - started:.0f} s)")
    reader.close()
    writer.close()
    return time.perf_counter() - started


async def build_index(db_path: Path, qdrant_path: Path) -> dict:
    """Build the vector index from the stored embeddings alone, as the service heals a lost index.

    A fresh ``IndexManager`` over an empty ``QDRANT_PATH``, its embedder down all along, is timed
    from ``start()`` to ``consistent``: the same code path (generation manifest, child-process
    HNSW build) as a service whose index was lost. This is the "rebuild from stored
    embeddings" figure at the store's size.
    """
    store = SqliteStore.open(str(db_path))
    catalog = SqliteIndexCatalog(store.database)
    index = QdrantEdgeIndex(qdrant_path)
    down = FakeEmbedder(DIMENSION, model=MODEL.model)
    down.go_down()  # the rebuild must not need the embedder
    manager = IndexManager(index, catalog, store, down, MODEL.embedder, check_seconds=0.2)
    manager.model = MODEL
    phases: dict[str, float] = {}
    began = time.perf_counter()
    await manager.start()
    manager.run()
    while (status := manager.status())["status"] != "consistent":
        for name, item in status.get("collections", {}).items():
            phase = (item.get("progress") or {}).get("phase")
            if phase and f"{name}:{phase}" not in phases:
                phases[f"{name}:{phase}"] = round(time.perf_counter() - began, 1)
        await asyncio.sleep(0.2)
    seconds = time.perf_counter() - began
    points = await manager.count("episodes")
    await manager.close()
    await index.close()
    await store.close()
    return {"seconds": round(seconds, 1), "points": points, "phases_started_at_s": phases,
            "embedder": "down (FakeEmbedder.go_down): built from SQLite alone"}


def episodes_shard(qdrant_path: Path) -> Path:
    """The active episodes generation's shard directory (``episodes-<store>-<token>``)."""
    found = sorted(p for p in qdrant_path.glob("episodes-*") if p.is_dir())
    if len(found) != 1:
        raise RuntimeError(f"expected one episodes generation under {qdrant_path}, found {found}")
    return found[0]


def reindex_pending(db_path: Path) -> bool:
    """Whether the store holds a reindex request (``index_meta.reindex``): a migration made after
    the store was loaded asks for one when its points lack payload fields (owner, metadata). A
    server started on such a store rebuilds its index first thing, under the rows."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT 1 FROM index_meta WHERE key = 'reindex'").fetchone() is not None
    except sqlite3.OperationalError:  # no index_meta yet: an older schema, migrated on open
        return False
    finally:
        conn.close()


def drop_reindex_request(db_path: Path) -> None:
    """Clear a pending reindex request (in a scratch copy only: ``run.py --stale-index``)."""
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute("DELETE FROM index_meta WHERE key = 'reindex'")
    conn.close()


def ensure_store(scale: str, log=print, index: bool = True, stale_index: bool = False) -> dict:
    """The manifest of ``scale``'s store, loading it first if it is missing, unfinished or of an older layout.

    ``index=False`` stops after the stored embeddings (no HNSW build: hours at 1M on a small
    shared machine); such a store serves the SQLite-only rows (``run.py --sqlite-only``). A later
    call with ``index=True`` builds the index of a store loaded that way, from its stored embeddings,
    and rebuilds an index a migration asked to rebuild (`reindex_pending`) unless ``stale_index``.
    """
    found = manifest(scale)
    target = scale_dir(scale)
    db_path, qdrant_path = target / "memory.db", target / "memory.db.qdrant"
    if found is None or found.get("layout") != LAYOUT or found.get("dimension") != DIMENSION:
        episodes = SCALES[scale]
        sqlite_marker = target / "sqlite-ready.json"
        if sqlite_marker.is_file() and json.loads(sqlite_marker.read_text()).get("layout") == LAYOUT:
            sessions, sql_seconds = (json.loads(sqlite_marker.read_text())[k] for k in ("sessions", "seconds"))
            log(f"resuming the {scale} store in {target} after its SQLite load ...")
        else:
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            log(f"loading the {scale} store ({episodes} episodes) into {target} ...")
            gen = TextGenerator()
            sessions, sql_seconds = asyncio.run(_load_sqlite(db_path, episodes, gen))
            log(f"  sqlite: {sql_seconds:.1f} s ({episodes / sql_seconds:,.0f} episodes/s)")
            sqlite_marker.write_text(json.dumps({"layout": LAYOUT, "sessions": sessions, "seconds": sql_seconds}))
        embed_seconds = _store_embeddings(db_path, log)
        log(f"  stored embeddings (hash, {DIMENSION}-d, 2 processes): {embed_seconds:.1f} s")
        found = {
            "scale": scale, "episodes": episodes, "sessions": sessions, "dimension": DIMENSION, "seed": SEED,
            "layout": LAYOUT, "model": {"embedder": MODEL.embedder, "model": MODEL.model},
            "load_seconds": {"sqlite": round(sql_seconds, 1), "stored_embeddings": round(embed_seconds, 1)},
            "indexed": False, "loaded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        (target / "ready.json").write_text(json.dumps(found, indent=2))
    if index and found.get("indexed") and not stale_index and reindex_pending(db_path):
        # The index predates a migration that asked for a rebuild: every server on a copy of this
        # store would rebuild it under the rows. Rebuild it here once, timed like a first build.
        log(f"  the {scale} store's index predates a migration's reindex request: rebuilding it")
        found["indexed"] = False
    if index and not found.get("indexed"):
        shutil.rmtree(qdrant_path, ignore_errors=True)
        loadavg = round(os.getloadavg()[0], 2)
        built = asyncio.run(build_index(db_path, qdrant_path))
        built["loadavg_1m_before"], built["loadavg_1m_after"] = loadavg, round(os.getloadavg()[0], 2)
        log(f"  vector index rebuilt from stored embeddings: {built['seconds']} s ({built['points']} points)")
        found["load_seconds"]["index_from_stored"] = built["seconds"]
        found.update(indexed=True, rebuild_from_stored=built)
        found["bytes"] = {"file": db_path.stat().st_size,
                          "qdrant_allocated": sum(p.stat().st_blocks * 512 for p in qdrant_path.rglob("*") if p.is_file())}
        (target / "ready.json").write_text(json.dumps(found, indent=2))
    return found


def scratch_copy(scale: str, index: bool = True) -> Path:
    """A throwaway copy of the pristine store for one run (POSTs must not grow the original);
    ``index=False`` leaves the vector index out (SQLite-only runs: it may be mid-build)."""
    source, scratch = scale_dir(scale), DATA / f"run-{scale}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    shutil.copy2(source / "memory.db", scratch / "memory.db")
    if index and (source / "memory.db.qdrant").is_dir():
        shutil.copytree(source / "memory.db.qdrant", scratch / "memory.db.qdrant")
    return scratch


if __name__ == "__main__":
    # bench/load.py 10k 100k [--no-index 1m]: the scales after --no-index get no vector index.
    names, build = sys.argv[1:] or ["10k"], True
    for name in names:
        if name == "--no-index":
            build = False
            continue
        print(json.dumps(ensure_store(name, index=build), indent=2))
