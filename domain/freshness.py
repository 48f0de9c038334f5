"""Read your writes: a search embeds the waiting records of the scope it reads before it reads.

An episode is answered 201 before it is embedded (the outbox and the background worker embed it a
moment later), so a search right after a write could miss it in the vector leg and say nothing. A
search therefore looks up the live embedding jobs of its own scope (a session, a user's or an
agent's sessions) and, when there are any, embeds up to ``max_jobs`` of them on the query path,
waiting at most ``max_seconds``. With the in-process model this is a few milliseconds for a
handful of turns. What is still waiting afterwards, because there were more, the time ran out or
the embedder is down, is counted in the answer as ``pending``: a search may miss those records'
meaning, and says so.

Work that outlives the wait is not cancelled: it finishes in the background (the worker would
redo it otherwise), and a later search that needs the same jobs waits for that work, not a copy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from domain.errors import DomainError
from domain.indexing import IndexingService
from domain.outbox import OutboxScope
from ports.store import Store

DEFAULT_MAX_JOBS = 64
DEFAULT_MAX_SECONDS = 0.2


class ReadYourWrites:
    def __init__(self, store: Store, indexing: IndexingService, max_jobs: int = DEFAULT_MAX_JOBS,
                 max_seconds: float = DEFAULT_MAX_SECONDS) -> None:
        self._store = store
        self._indexing = indexing
        self.max_jobs = max(0, max_jobs)
        self.max_seconds = max(0.0, max_seconds)
        self._in_flight: dict[tuple[str, int], asyncio.Task] = {}

    async def catch_up(self, sources: Sequence[str], scope: OutboxScope, embed: bool = True) -> int:
        """Embed the scope's waiting records of ``sources`` within the bounds (``embed=False``:
        only count them); returns how many are still waiting."""
        waiting = 0
        tasks: dict[asyncio.Task, int] = {}
        for source in sources:
            limit = self.max_jobs if embed and self.max_seconds > 0 else 0
            pending = await self._store.outbox.pending_in_scope(source, scope, limit)
            waiting += pending.total
            if pending.jobs:
                for task, count in self._start(source, pending.jobs).items():
                    tasks[task] = tasks.get(task, 0) + count
        if tasks:
            done, _ = await asyncio.wait(tasks, timeout=self.max_seconds)
            for task in done:
                if not task.cancelled() and task.exception() is None and task.result():
                    waiting -= tasks[task]
        return max(0, waiting)

    def _start(self, source: str, jobs) -> dict[asyncio.Task, int]:
        """The tasks embedding ``jobs``: those already under way for some of them, and one new task
        for the rest; each with how many of ``jobs`` it covers."""
        out: dict[asyncio.Task, int] = {}
        fresh = []
        for job in jobs:
            task = self._in_flight.get((source, job.id))
            if task is None:
                fresh.append(job)
            else:
                out[task] = out.get(task, 0) + 1
        if fresh:
            task = asyncio.get_running_loop().create_task(self._index(source, fresh))
            keys = [(source, job.id) for job in fresh]
            for key in keys:
                self._in_flight[key] = task
            task.add_done_callback(lambda _t, keys=keys: [self._in_flight.pop(k, None) for k in keys])
            out[task] = len(fresh)
        return out

    async def _index(self, source: str, jobs) -> bool:
        """Whether every job completed (``index_now`` completes all of them or none)."""
        try:
            return await self._indexing.index_now(source, jobs) == len(jobs)
        except DomainError:  # the store failed: the jobs stay for the worker
            return False
