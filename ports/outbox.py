"""The embedding outbox: durable jobs that keep the vector index in step with the records.

Jobs are enqueued only inside a unit of work, in the same transaction as the change that needs
them (``OutboxWrites``), so a crash never leaves a record saved but never embedded, nor a point
whose record is gone. The worker drains them through ``EmbeddingOutbox``.

A claimed job is given back (``release``, ``defer``, ``bury``, ``OutboxWrites.complete``) only while
the caller still holds the claim it was handed: the job is matched by its id and its
``next_attempt_at`` together, as the caller read it. A worker whose lease ran out (a slow embedder, a
paused process) and whose job another claim has taken since acts on nothing: it cannot make that
job due again while the new holder works on it, count an attempt against it, bury it or remove it.
A job read by ``due`` or ``dead`` carries its stored time too, so it can be given back the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from domain.outbox import CLAIM_LEASE, Backlog, JobOp, OutboxJob, OutboxScope, ScopePending  # noqa: F401  (CLAIM_LEASE: named in claim)
from domain.record_kinds import Source


class EmbeddingOutbox(Protocol):
    async def due(self, limit: int, now: datetime) -> list[OutboxJob]:
        """Live jobs whose retry time has come, oldest first; a job stays until a unit of work
        completes it (``OutboxWrites.complete``, with what its completion means)."""
        ...

    async def claim(self, limit: int, now: datetime, only: Sequence[int] | None = None) -> list[OutboxJob]:
        """The jobs ``due`` would return, taken for the caller: none of them is returned by another
        ``claim`` (of this process or any other sharing the store) until ``CLAIM_LEASE`` after
        ``now``, unless ``defer``/``retry_dead`` set another time first; completing them removes them.
        So workers of several processes each do a job once, and a worker that dies mid-job leaves
        it due again when the lease ends. A record's job is not taken while another job of the
        same record is claimed or waiting to retry (session deletes excepted: they name no
        record), so one record is never in flight twice and an older text's vector never lands
        after a newer one's; jobs of one record due together are taken together. With ``only``,
        just those of the named jobs (a search embedding the records it is about to read)."""
        ...

    async def release(self, jobs: Sequence[OutboxJob], now: datetime) -> int:
        """Give claimed jobs back, due at ``now`` with their attempts unchanged: a claim abandoned
        (a search's embedding failed), which says nothing against the records. Only jobs the
        caller still holds; dead, unknown or re-claimed ones are left as they are. Returns how many
        were released."""
        ...

    async def defer(self, jobs: Sequence[OutboxJob], error: str, retry_at: datetime) -> int:
        """Record a failed attempt of jobs the caller still holds: bump attempts, keep the error
        (≤ 500 chars), hide the jobs until ``retry_at``. Returns how many were deferred; a job
        another claim holds now keeps its attempts and its time."""
        ...

    async def bury(self, jobs: Sequence[OutboxJob], error: str) -> int:
        """Give up on jobs the caller still holds (dead letters): bump attempts, keep the error,
        set ``dead_at``; a dead job is never due and is not counted as pending, but stays until
        retried. Returns how many were buried; a job another claim holds now stays live."""
        ...

    async def dead(self, limit: int) -> list[OutboxJob]:
        """Dead-lettered jobs, oldest first, at most ``limit``."""
        ...

    async def retry_dead(self, job_ids: Sequence[int] | None = None) -> int:
        """Make dead jobs (those named, or all when ``None``) due now with no attempts; returns
        how many were revived. Unknown or live ids are ignored."""
        ...

    async def backlog(self) -> Backlog:
        """Live jobs (pending, failing, oldest, last error) and the number of dead ones."""
        ...

    async def pending_in_scope(self, collection: Source, scope: OutboxScope, limit: int) -> ScopePending:
        """The live (not dead) ``upsert`` jobs of ``collection`` whose record exists and lies in
        ``scope``, due or not, oldest first, at most ``limit`` of them (0: none), with the count of
        all such jobs. A search uses it to embed what it is about to read (read your writes)."""
        ...


class OutboxWrites(Protocol):
    """Synchronous, valid only inside ``UnitOfWork.run``: the jobs commit with the change."""

    def enqueue(self, collection: Source, op: JobOp, ref_ids: Sequence[int]) -> None:
        """One job per id, due now, in the order given."""
        ...

    def complete(self, jobs: Sequence[OutboxJob]) -> list[int]:
        """Remove finished jobs the caller still holds; returns the ids removed. An unknown job,
        or one another claim has taken since the caller's lease ran out, stays (its holder
        completes it). Inside a unit, so what the completion means (the record's ``embedded``
        event, written for the removed jobs alone) commits with it."""
        ...

    def enqueue_every(self, collection: Source) -> int:
        """An ``upsert`` job for every record of ``collection`` (by id); returns how many."""
        ...
