"""The embedding outbox in memory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from adapters.memory.state import MemoryState
from domain.models import format_timestamp, utc_now
from domain.outbox import CLAIM_LEASE, Backlog, JobOp, OutboxJob, OutboxScope, ScopePending
from domain.record_kinds import KINDS, Source


def _held(outbox: dict[int, OutboxJob], jobs: Sequence[OutboxJob]) -> list[OutboxJob]:
    """The stored jobs of ``jobs`` whose retry time is still the one the caller read (so the caller
    still holds their claim), each once."""
    found = {}
    for job in jobs:
        stored = outbox.get(job.id)
        if stored is not None and stored.next_attempt_at == job.next_attempt_at:
            found[job.id] = stored
    return list(found.values())


class MemoryOutbox:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def due(self, limit: int, now: datetime) -> list[OutboxJob]:
        cutoff = format_timestamp(now)
        return [job for _id, job in sorted(self._s.outbox.items())
                if job.next_attempt_at <= cutoff and job.dead_at is None][:limit]

    async def claim(self, limit: int, now: datetime, only: Sequence[int] | None = None) -> list[OutboxJob]:
        cutoff = format_timestamp(now)
        # A record's job waits while another of its jobs is claimed or backing off.
        busy = {(job.collection, job.ref_id) for job in self._s.outbox.values()
                if job.op != "delete_session" and job.dead_at is None and job.next_attempt_at > cutoff}
        named = None if only is None else set(only)
        jobs = [job for job in await self.due(len(self._s.outbox), now)
                if (named is None or job.id in named)
                and (job.op == "delete_session" or (job.collection, job.ref_id) not in busy)][:limit]
        lease = format_timestamp(now + CLAIM_LEASE)
        for job in jobs:
            self._s.outbox[job.id] = replace(job, next_attempt_at=lease)
        return [self._s.outbox[job.id] for job in jobs]

    async def release(self, jobs: Sequence[OutboxJob], now: datetime) -> int:
        live = [job for job in _held(self._s.outbox, jobs) if job.dead_at is None]
        for job in live:
            self._s.outbox[job.id] = replace(job, next_attempt_at=format_timestamp(now))
        return len(live)

    async def defer(self, jobs: Sequence[OutboxJob], error: str, retry_at: datetime) -> int:
        mine = _held(self._s.outbox, jobs)
        for job in mine:
            self._s.outbox[job.id] = replace(job, attempts=job.attempts + 1, last_error=error[:500],
                                             next_attempt_at=format_timestamp(retry_at))
        return len(mine)

    async def bury(self, jobs: Sequence[OutboxJob], error: str) -> int:
        now, mine = utc_now(), _held(self._s.outbox, jobs)
        for job in mine:
            self._s.outbox[job.id] = replace(job, attempts=job.attempts + 1, last_error=error[:500], dead_at=now)
        return len(mine)

    async def dead(self, limit: int) -> list[OutboxJob]:
        return [job for _id, job in sorted(self._s.outbox.items()) if job.dead_at is not None][:limit]

    async def retry_dead(self, job_ids: Sequence[int] | None = None) -> int:
        wanted = set(self._s.outbox) if job_ids is None else set(job_ids)
        revived = 0
        for job_id in sorted(wanted & set(self._s.outbox)):
            job = self._s.outbox[job_id]
            if job.dead_at is not None:
                self._s.outbox[job_id] = replace(job, attempts=0, dead_at=None, next_attempt_at=utc_now())
                revived += 1
        return revived

    async def backlog(self) -> Backlog:
        everything = sorted(self._s.outbox.values(), key=lambda j: j.id)
        jobs = [j for j in everything if j.dead_at is None]
        errors = [j.last_error for j in everything if j.last_error]
        return Backlog(len(jobs), min((j.created_at for j in jobs), default=None),
                       errors[-1] if errors else None, sum(1 for j in jobs if j.attempts > 0),
                       len(everything) - len(jobs))

    async def pending_in_scope(self, collection: Source, scope: OutboxScope, limit: int) -> ScopePending:
        kind = KINDS[collection]
        records = getattr(self._s, kind.name)

        def in_scope(job: OutboxJob) -> bool:
            record = records.get(job.ref_id)
            if job.collection != collection or job.op != "upsert" or job.dead_at is not None or record is None:
                return False
            return ((scope.session_id is None or not kind.in_sessions or record.session_id == scope.session_id)
                    and (scope.user_id is None or record.user_id == scope.user_id)
                    and (scope.agent_id is None or not kind.in_sessions or record.agent_id == scope.agent_id))

        jobs = [job for _id, job in sorted(self._s.outbox.items()) if in_scope(job)]
        return ScopePending(jobs[:max(limit, 0)], len(jobs))


class OutboxTx:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    def enqueue(self, collection: Source, op: JobOp, ref_ids: Sequence[int]) -> None:
        now = utc_now()
        for ref_id in ref_ids:
            job_id = self._s.next_id("outbox")
            self._s.outbox[job_id] = OutboxJob(job_id, collection, op, ref_id, 0, now, now)

    def complete(self, jobs: Sequence[OutboxJob]) -> list[int]:
        mine = _held(self._s.outbox, jobs)
        for job in mine:
            del self._s.outbox[job.id]
        return [job.id for job in mine]

    def enqueue_every(self, collection: Source) -> int:
        ids = sorted(getattr(self._s, KINDS[collection].name))  # each kind's table carries its name
        self.enqueue(collection, "upsert", ids)
        return len(ids)
