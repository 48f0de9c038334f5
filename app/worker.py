"""The background embedding worker, run in the app's lifespan.

It drains the outbox through ``IndexingService`` pass after pass while there is work, naps
briefly when there is none, and is woken early by ``notify()`` after a write. After a pass that
found less than a full batch (writes arriving steadily, not a backlog) it waits ``GATHER_SECONDS``
before the next one, so a pass embeds what arrived meanwhile together: under the peer bench's
POST row back-to-back passes took ~20 records each, and each pass's fixed costs (its reads, its
two write transactions with their fsyncs, its calls into the index) were paid
again for every few requests. A backlog (full batches) drains without a pause. Stopping lets the
current pass finish, so a batch is never abandoned half-done (its jobs would be retried anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from domain.indexing import IndexingService

log = logging.getLogger("nexusai.worker")

IDLE_SECONDS = 0.25
GATHER_SECONDS = 0.05  # between passes under a steady flow: what the vector index lags behind, at most


class EmbeddingWorker:
    """Drains the outbox while ``drains()`` says so. Where several processes serve one SQLite file,
    only the one maintaining the index drains it: two drainers could take the same jobs, and one
    that read a record before it was changed could upsert the old text's vector after the other
    wrote the new one's. The others' writes are picked up within ``IDLE_SECONDS``. On PostgreSQL
    every process drains: a claim locks the jobs it takes, so no job is taken twice."""

    def __init__(self, indexing: IndexingService, batch: int = 64, gather: float = GATHER_SECONDS,
                 drains: Callable[[], bool] = lambda: True) -> None:
        self._indexing = indexing
        self._drains = drains
        self._batch = batch
        self._gather = gather
        self._wake = asyncio.Event()
        self._stopped = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="embedding-worker")

    def notify(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                result = await self._indexing.run_once(self._batch) if self._drains() else None
            except Exception:  # the store itself failed; keep the worker alive and try again
                log.exception("embedding worker pass failed")
                result = None
            if result is not None and result.done and not self._stopped.is_set():
                if result.done + result.deferred + result.dead < self._batch and self._gather > 0:
                    with contextlib.suppress(asyncio.TimeoutError):  # a stop ends the pause
                        await asyncio.wait_for(self._stopped.wait(), self._gather)
                continue
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_SECONDS)
