"""The SQLite unit of work: the whole unit is ONE write of the group-committing writer.

``run(fn)`` hands the writer a single callable; the writer runs it in its own SAVEPOINT inside
the group's transaction (see database.py), so a unit is all-or-nothing, shares the group's one
COMMIT (and fsync) with its neighbours, and costs exactly the thread hop a write always cost.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TypeVar

from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.entities import EntityTx
from adapters.sqlite.episodes import EpisodeTx
from adapters.sqlite.history import EventTx, HistoryTx
from adapters.sqlite.idempotency import IdempotencyTx
from adapters.sqlite.outbox import OutboxTx
from adapters.sqlite.sessions import SessionTx
from adapters.sqlite.summaries import SummaryTx
from domain.changes import DEFAULT_EVENT_RETENTION

T = TypeVar("T")


class SqliteTransaction:
    """The repositories of one unit, bound to the writer's connection while it runs."""

    __slots__ = ("sessions", "episodes", "entities", "summaries", "outbox", "history", "events", "idempotency")

    def __init__(self, conn: sqlite3.Connection, event_retention: int = DEFAULT_EVENT_RETENTION) -> None:
        self.sessions = SessionTx(conn)
        self.episodes = EpisodeTx(conn)
        self.entities = EntityTx(conn)
        self.summaries = SummaryTx(conn)
        self.outbox = OutboxTx(conn)
        self.history = HistoryTx(conn)
        self.events = EventTx(conn, event_retention)
        self.idempotency = IdempotencyTx(conn)


class SqliteUnitOfWork:
    def __init__(self, db: SqliteDatabase, event_retention: int = DEFAULT_EVENT_RETENTION) -> None:
        self._db = db
        self._keep = event_retention

    async def run(self, fn: Callable[[SqliteTransaction], T]) -> T:
        # The unit runs on the writer thread in a copy of the caller's context, so what the request
        # set (the actor a history version names) is seen there.
        context = contextvars.copy_context()
        return await self._db.write(lambda conn: context.run(fn, SqliteTransaction(conn, self._keep)))
