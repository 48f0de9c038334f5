"""The embedding worker's pacing: a backlog drains pass after pass, a steady flow is gathered."""

from __future__ import annotations

import asyncio

from app.worker import EmbeddingWorker
from domain.indexing import PassResult


class _ScriptedIndexing:
    """Answers each pass with the next number of jobs done (0 once the script runs out)."""

    def __init__(self, done: list[int], deferred: int = 0) -> None:
        self._done = list(done)
        self._deferred = deferred
        self.batches: list[int] = []
        self.called = asyncio.Event()

    async def run_once(self, batch: int) -> PassResult:
        self.batches.append(batch)
        self.called.set()
        if not self._done:
            return PassResult()
        return PassResult(done=self._done.pop(0), deferred=self._deferred)


async def _passes(indexing: _ScriptedIndexing, count: int) -> None:
    while len(indexing.batches) < count:
        indexing.called.clear()
        await asyncio.wait_for(indexing.called.wait(), 5)


async def _run_for(indexing: _ScriptedIndexing, count: int, gather: float) -> None:
    """A worker (batches of 8) running until ``count`` passes have been asked for, then stopped."""
    worker = EmbeddingWorker(indexing, batch=8, gather=gather)  # type: ignore[arg-type]
    worker.start()
    try:
        await _passes(indexing, count)
    finally:
        await worker.stop()


async def test_a_backlog_drains_without_a_pause() -> None:
    indexing = _ScriptedIndexing([8, 8, 8])  # full batches: a backlog
    await _run_for(indexing, 4, gather=3600)  # three full passes, then the empty one that finds nothing
    assert indexing.batches[:4] == [8, 8, 8, 8]


async def test_a_full_batch_with_failed_jobs_in_it_drains_without_a_pause() -> None:
    indexing = _ScriptedIndexing([6, 6, 6], deferred=2)  # 8 jobs a pass, 2 of them deferred: a backlog
    await _run_for(indexing, 4, gather=3600)


async def test_a_part_batch_waits_for_more_and_a_stop_ends_the_wait() -> None:
    indexing = _ScriptedIndexing([3, 3])  # a part batch: writes arriving one by one
    worker = EmbeddingWorker(indexing, batch=8, gather=3600)  # type: ignore[arg-type]
    worker.start()
    await _passes(indexing, 1)
    for _ in range(50):  # the loop runs freely meanwhile: no second pass before the gather time
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    assert len(indexing.batches) == 1
    worker.notify()  # a write's wake-up does not cut the gathering short
    await asyncio.sleep(0.05)
    assert len(indexing.batches) == 1
    await asyncio.wait_for(worker.stop(), 5)  # the pause ends at the stop, not after an hour


async def test_a_part_batch_is_followed_by_a_pass_after_the_gather_time() -> None:
    indexing = _ScriptedIndexing([3, 3, 8])
    await _run_for(indexing, 4, gather=0.01)
    assert len(indexing.batches) >= 4


async def test_a_process_that_does_not_maintain_the_index_drains_nothing_until_it_does() -> None:
    indexing = _ScriptedIndexing([8])
    maintaining = False
    worker = EmbeddingWorker(indexing, batch=8, drains=lambda: maintaining)  # type: ignore[arg-type]
    worker.start()
    try:
        worker.notify()  # a write of its own wakes it: still not its outbox to drain
        await asyncio.sleep(0.3)  # past the idle wait: it looked again, and still took nothing
        assert indexing.batches == []
        maintaining = True  # it took the maintenance over
        await _passes(indexing, 1)
        assert indexing.batches[0] == 8
    finally:
        await worker.stop()
