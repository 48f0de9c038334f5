"""The PostgreSQL unit of work: one transaction on a pooled connection, on a worker thread.

The unit's function is synchronous (``ports.unit_of_work``): it runs whole inside the transaction,
with the caller's context (``asyncio.to_thread`` copies it, so the actor a history version names
is seen there), and the transaction commits when it returns or rolls back when it raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import psycopg

from adapters.postgres.database import PostgresDatabase
from adapters.postgres.entities import EntityTx
from adapters.postgres.episodes import EpisodeTx
from adapters.postgres.history import EventTx, HistoryTx
from adapters.postgres.idempotency import IdempotencyTx
from adapters.postgres.outbox import OutboxTx
from adapters.postgres.sessions import SessionTx
from adapters.postgres.summaries import SummaryTx
from domain.changes import DEFAULT_EVENT_RETENTION

T = TypeVar("T")


class PostgresTransaction:
    """The repositories of one unit, bound to its connection while it runs."""

    __slots__ = ("sessions", "episodes", "entities", "summaries", "outbox", "history", "events", "idempotency")

    def __init__(self, conn: psycopg.Connection, event_retention: int = DEFAULT_EVENT_RETENTION) -> None:
        self.sessions = SessionTx(conn)
        self.episodes = EpisodeTx(conn)
        self.entities = EntityTx(conn)
        self.summaries = SummaryTx(conn)
        self.outbox = OutboxTx(conn)
        self.history = HistoryTx(conn)
        self.events = EventTx(conn, event_retention)
        self.idempotency = IdempotencyTx(conn)


class PostgresUnitOfWork:
    def __init__(self, db: PostgresDatabase, event_retention: int = DEFAULT_EVENT_RETENTION) -> None:
        self._db = db
        self._keep = event_retention

    async def run(self, fn: Callable[[PostgresTransaction], T]) -> T:
        return await self._db.write(lambda conn: fn(PostgresTransaction(conn, self._keep)))
