"""The unit of work: a domain rule's writes, committed together or not at all.

A domain function is plain synchronous code over the transactional repositories of one
``Transaction`` (``domain.writes`` holds them all)::

    def add_episodes(tx, new):
        episodes = tx.episodes.insert(new)
        tx.outbox.enqueue(EPISODES.name, "upsert", [e.id for e in episodes])
        return episodes

    episodes = await uow.run(lambda tx: add_episodes(tx, new))

Synchronous on purpose: nothing can await (and so interleave) inside a unit, and an adapter can
run the whole unit where its transaction lives — the SQLite writer thread runs it as one write of
its group commit, in its own savepoint; the in-memory store runs it under its lock and restores
what it changed when the function raises. Cross-cutting writes (history rows, change events)
belong in the same place: a repository on ``Transaction`` that a domain function appends to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from ports.entities import EntityWrites
from ports.episodes import EpisodeWrites
from ports.events import EventWrites
from ports.history import HistoryWrites
from ports.idempotency import IdempotencyWrites
from ports.outbox import OutboxWrites
from ports.sessions import SessionWrites
from ports.summaries import SummaryWrites

T = TypeVar("T")


class Transaction(Protocol):
    """The repositories a unit of work writes through (valid only while ``run`` runs)."""

    sessions: SessionWrites
    episodes: EpisodeWrites
    entities: EntityWrites
    summaries: SummaryWrites
    outbox: OutboxWrites
    history: HistoryWrites
    events: EventWrites
    idempotency: IdempotencyWrites


class UnitOfWork(Protocol):
    async def run(self, fn: Callable[[Transaction], T]) -> T:
        """Run ``fn`` in one transaction: on return everything it wrote is committed (durably, as
        the store promises), when it raises nothing it wrote remains and the error propagates.
        ``fn`` must not block on I/O of its own; it may be run on another thread."""
        ...
