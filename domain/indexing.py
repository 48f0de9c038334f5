"""Draining the embedding outbox into the vector index.

One pass takes the due jobs, embeds the records they name (in the embedder's batch size), writes
the points, applies deletes, and completes the jobs that succeeded. A failed step defers its jobs
with exponential backoff and jitter; nothing is dropped, so an outage only delays vectors.
Upserts run before deletes within a pass, and a job whose record has vanished deletes its point,
so the index converges on the store whatever order changes arrived in.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from domain.errors import DomainError
from domain.models import Entity, Episode, Summary
from domain.outbox import OutboxJob
from domain.vectors import COLLECTIONS, VectorFilter, VectorPoint, point_payload
from ports.embedder import Embedder
from ports.memory_store import MemoryStore
from ports.vector_index import VectorIndex

log = logging.getLogger("nexusai.indexing")

BASE_DELAY = 0.5
MAX_DELAY = 300.0
LOG_EVERY = 60.0
EMBED_CONCURRENCY = 4


def backoff_delay(attempts: int, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before attempt ``attempts + 1``: doubling from 0.5 s to 5 min, ±50 % jitter."""
    base = min(MAX_DELAY, BASE_DELAY * (2 ** min(attempts, 20)))
    return base * (0.5 + rng())


@dataclass
class PassResult:
    done: int = 0
    deferred: int = 0
    embedded: int = 0


class IndexingService:
    def __init__(
        self, store: MemoryStore, index: VectorIndex, embedder: Embedder,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._index = index
        self._embedder = embedder
        self._clock = clock
        self._last_log = 0.0
        self._failing = False
        self.embed_calls = 0
        self.embed_failures = 0
        self.last_error: str | None = None

    async def ensure_collections(self) -> None:
        """Create the three collections at the embedder's dimension (start-up)."""
        for name in COLLECTIONS:
            await self._index.ensure_collection(name, self._embedder.dimension)

    async def run_once(self, batch: int = 64) -> PassResult:
        """Process up to ``batch`` due jobs; returns what was done and deferred."""
        jobs = await self._store.due_jobs(batch, self._clock())
        result = PassResult()
        if not jobs:
            return result
        upserts: dict[str, list[OutboxJob]] = defaultdict(list)
        deletes: dict[str, list[OutboxJob]] = defaultdict(list)
        sessions: list[OutboxJob] = []
        for job in jobs:
            if job.op == "upsert":
                upserts[job.collection].append(job)
            elif job.op == "delete":
                deletes[job.collection].append(job)
            else:
                sessions.append(job)
        for collection, group in upserts.items():
            await self._step(result, group, lambda c=collection, g=group: self._upsert(c, g))
        for collection, group in deletes.items():
            ids = sorted({j.ref_id for j in group})
            await self._step(result, group, lambda c=collection, i=ids: self._index.delete(c, i))
        for job in sessions:
            flt = VectorFilter(session_id=job.ref_id)
            await self._step(result, [job], lambda j=job, f=flt: self._index.delete_by_filter(j.collection, f))
        if result.done and self._failing and not result.deferred:
            self._failing = False
            log.info("embedding recovered; backlog draining")
        return result

    async def _step(self, result: PassResult, jobs: Sequence[OutboxJob], action) -> None:
        try:
            embedded = await action()
        except DomainError as exc:
            await self._defer(jobs, exc.message)
            result.deferred += len(jobs)
            return
        except Exception as exc:  # an adapter bug must not kill the worker or lose the jobs
            await self._defer(jobs, f"{type(exc).__name__}: {exc}")
            result.deferred += len(jobs)
            return
        await self._store.complete_jobs([j.id for j in jobs])
        result.done += len(jobs)
        result.embedded += embedded if isinstance(embedded, int) else 0

    async def _upsert(self, collection: str, jobs: Sequence[OutboxJob]) -> int:
        ids = list(dict.fromkeys(j.ref_id for j in jobs))
        items = await self._load(collection, ids)
        found = {item.id for item in items}
        gone = [i for i in ids if i not in found]
        if items:
            size = max(1, self._embedder.max_batch)
            chunks = [items[start:start + size] for start in range(0, len(items), size)]
            # Chunks go to the embedder concurrently (a few at a time): a backend's own batching
            # leaves it idle between round trips otherwise.
            gate = asyncio.Semaphore(EMBED_CONCURRENCY)

            async def embed(chunk):
                async with gate:
                    self.embed_calls += 1
                    try:
                        return await self._embedder.embed([item.text for item in chunk])
                    except DomainError:
                        self.embed_failures += 1
                        raise

            results = await asyncio.gather(*(embed(chunk) for chunk in chunks), return_exceptions=True)
            for outcome in results:
                if isinstance(outcome, BaseException):
                    raise outcome
            vectors = [vector for chunk_vectors in results for vector in chunk_vectors]
            points = [VectorPoint(item.id, vec, _payload(item)) for item, vec in zip(items, vectors)]
            await self._index.upsert(collection, points)
        if gone:
            await self._index.delete(collection, gone)
        return len(items)

    async def _load(self, collection: str, ids: list[int]) -> list[Episode | Entity | Summary]:
        if collection == "episodes":
            return await self._store.get_episodes(ids)
        if collection == "entities":
            return await self._store.get_entities(ids)
        return await self._store.get_summaries(ids)

    async def _defer(self, jobs: Sequence[OutboxJob], error: str) -> None:
        self.last_error = error
        attempts = max(j.attempts for j in jobs)
        retry_at = self._clock() + timedelta(seconds=backoff_delay(attempts))
        await self._store.defer_jobs([j.id for j in jobs], error, retry_at)
        now = time.monotonic()
        if not self._failing or now - self._last_log >= LOG_EVERY:
            # One line when trouble starts, then at most one a minute: an outage must not flood logs.
            log.warning("embedding jobs deferred (%d jobs, attempt %d): %s", len(jobs), attempts + 1, error)
            self._last_log = now
        self._failing = True


def _payload(item: Episode | Entity | Summary) -> dict:
    session_id = getattr(item, "session_id", None)
    return point_payload(item.created_at, session_id)
