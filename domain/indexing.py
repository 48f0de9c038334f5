"""Draining the embedding outbox into the vector index.

One pass takes the due jobs, embeds the records they name (in the embedder's batch size), writes
the points, applies deletes, and completes the jobs that succeeded. A failed step defers its jobs
with exponential backoff and jitter; nothing is dropped, so an outage only delays vectors.

A failed upsert group is told apart as an outage or a poison record: when the embedder refused
the input itself (a permanent error) or still answers its probe, the group is split in halves and
each half retried at once, down to single records, so the good records are indexed in the same
pass. A record that fails on its own is deferred, and after ``max_attempts`` such failures it
becomes a dead letter (kept, listed, retried only on request). An outage never kills a job.
Upserts run before deletes within a pass, and a job whose record has vanished deletes its point,
so the index converges on the store whatever order changes arrived in.

Every outcome (complete, defer, bury, release) is given back with the jobs as claimed: when a pass
outlived its lease and another drainer claimed a job again, the outcome is that drainer's, and
this pass neither removes, retries nor buries the job, nor counts it.
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

from domain import writes
from domain.errors import DomainError, EmbeddingError, VectorIndexError
from domain.outbox import OutboxJob
from domain.redaction import redact
from domain.record_kinds import KINDS
from domain.vectors import VectorFilter, VectorPoint
from ports.embedder import Embedder
from ports.store import Store
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
    dead: int = 0


def _ignore(name: str) -> None:
    return None


class IndexingService:
    def __init__(
        self, store: Store, index: VectorIndex, embedder: Embedder,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC), max_attempts: int = 5,
    ) -> None:
        self._store = store
        self._index = index
        self._embedder = embedder
        self._clock = clock
        self._last_log = 0.0
        self._failing = False
        self.embed_calls = 0
        self.embed_failures = 0
        self.dead_lettered = 0
        self._count: Callable[[str], None] = _ignore
        self.max_attempts = max(1, max_attempts)
        self.last_error: str | None = None

    def count_with(self, count: Callable[[str], None]) -> None:
        """Also report each embed call, failure and dead letter, as it happens, to ``count``
        (called with ``"embed_calls"``, ``"embed_failures"`` or ``"dead_lettered"``): metrics
        that add up across processes."""
        self._count = count

    async def run_once(self, batch: int = 64) -> PassResult:
        """Process up to ``batch`` due jobs; returns what was done and deferred."""
        jobs = await self._store.outbox.claim(batch, self._clock())
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
            await self._upsert_isolating(result, collection, group)
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

    async def index_now(self, collection: str, jobs: Sequence[OutboxJob]) -> int:
        """Embed and index the records of these upsert jobs at once, outside the worker's passes
        (a search reading its own writes); returns how many jobs completed. The jobs are claimed
        first, as a worker claims them: one whose record a drainer (of this process or another)
        has in flight, or that waits to retry, is left to the drainers, so an older text's vector
        never lands after a newer one's. A failure gives the claimed jobs back as they were, to the
        worker's retries and backoff: the caller is a query, and must not decide that a record is
        poison."""
        if not jobs:
            return 0
        claimed = await self._store.outbox.claim(len(jobs), self._clock(), only=[job.id for job in jobs])
        if not claimed:
            return 0
        result, completed = PassResult(), False
        try:
            completed = await self._attempt(result, collection, claimed) is None
        finally:
            if not completed:  # failed, or cancelled as the service stops: due again now, not after the lease
                await self._store.outbox.release(claimed, self._clock())
        return result.done if completed else 0

    async def _step(self, result: PassResult, jobs: Sequence[OutboxJob], action) -> None:
        try:
            embedded = await action()
        except Exception as exc:  # an adapter bug must not kill the worker or lose the jobs
            result.deferred += await self._defer(jobs, _describe(exc))
            return
        result.done += await self._store.uow.run(lambda tx: writes.jobs_completed(tx, jobs))
        result.embedded += embedded if isinstance(embedded, int) else 0

    # -- failure path: isolating poison records ---------------------------------------------------
    async def _attempt(self, result: PassResult, collection: str, jobs: Sequence[OutboxJob]) -> Exception | None:
        try:
            embedded = await self._upsert(collection, jobs)
        except Exception as exc:  # an adapter bug must not kill the worker or lose the jobs
            return exc
        result.done += await self._store.uow.run(lambda tx: writes.jobs_completed(tx, jobs))
        result.embedded += embedded
        return None

    async def _upsert_isolating(self, result: PassResult, collection: str, jobs: Sequence[OutboxJob]) -> None:
        error = await self._attempt(result, collection, jobs)
        if error is None:
            return
        if not await self._about_the_input(error):
            result.deferred += await self._defer(jobs, _describe(error))
            return
        await self._split(result, collection, jobs, error)

    async def _about_the_input(self, error: Exception) -> bool:
        """Whether a failed group should be split: the embedder refused these texts, or it still
        embeds a probe text (so these records, not the service, are the problem). A vector-index
        failure or an embedder that answers nothing is an outage: every job waits alike."""
        if isinstance(error, EmbeddingError) and error.permanent:
            return True
        if isinstance(error, VectorIndexError):
            return False
        try:
            return (await self._embedder.probe()).reachable
        except Exception:  # a probe that raises is no evidence the embedder is up
            return False

    async def _split(self, result: PassResult, collection: str, jobs: Sequence[OutboxJob], error: Exception) -> None:
        if len(jobs) == 1:
            await self._fail_alone(result, jobs[0], error)
            return
        middle = len(jobs) // 2
        for half in (jobs[:middle], jobs[middle:]):
            half_error = await self._attempt(result, collection, half)
            if half_error is None:
                continue
            if isinstance(half_error, VectorIndexError):
                # The index failed meanwhile: an outage, not these records' fault.
                result.deferred += await self._defer(half, _describe(half_error))
            else:
                await self._split(result, collection, half, half_error)

    async def _fail_alone(self, result: PassResult, job: OutboxJob, error: Exception) -> None:
        message = _describe(error)
        if job.attempts + 1 >= self.max_attempts:
            self.last_error = message
            if not await self._store.outbox.bury([job], message):
                return  # the lease ran out and another drainer holds the job: its outcome, not this one
            self.dead_lettered += 1
            self._count("dead_lettered")
            log.warning("embedding job %d (%s %d) is a dead letter after %d attempts: %s", job.id,
                        job.collection, job.ref_id, job.attempts + 1, message)
            result.dead += 1
            return
        result.deferred += await self._defer([job], message)

    async def _upsert(self, collection: str, jobs: Sequence[OutboxJob]) -> int:
        ids = list(dict.fromkeys(j.ref_id for j in jobs))
        kind = KINDS[collection]
        items = await kind.load(self._store, ids)
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
                    self._count("embed_calls")
                    try:
                        return await self._embedder.embed([kind.text(item) for item in chunk])
                    except DomainError:
                        self.embed_failures += 1
                        self._count("embed_failures")
                        raise

            results = await asyncio.gather(*(embed(chunk) for chunk in chunks), return_exceptions=True)
            for outcome in results:
                if isinstance(outcome, BaseException):
                    raise outcome
            vectors = [vector for chunk_vectors in results for vector in chunk_vectors]
            points = [VectorPoint(item.id, vec, kind.payload(item)) for item, vec in zip(items, vectors)]
            await self._index.upsert(collection, points)
        if gone:
            await self._index.delete(collection, gone)
        return len(items)

    async def _defer(self, jobs: Sequence[OutboxJob], error: str) -> int:
        self.last_error = error
        attempts = max(j.attempts for j in jobs)
        retry_at = self._clock() + timedelta(seconds=backoff_delay(attempts))
        deferred = await self._store.outbox.defer(jobs, error, retry_at)
        now = time.monotonic()
        if not self._failing or now - self._last_log >= LOG_EVERY:
            # One line when trouble starts, then at most one a minute: an outage must not flood logs.
            log.warning("embedding jobs deferred (%d jobs, attempt %d): %s", deferred, attempts + 1, error)
            self._last_log = now
        self._failing = True
        return deferred


def _describe(error: Exception) -> str:
    # Stored in the outbox and shown by /health: never with a credential in it.
    text = error.message if isinstance(error, DomainError) else f"{type(error).__name__}: {error}"
    return redact(text) or type(error).__name__
