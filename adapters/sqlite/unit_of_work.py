"""The SQLite unit of work: the whole unit is ONE write of the group-committing writer.

``run(fn)`` hands the writer a single callable; the writer runs it in its own SAVEPOINT inside
the group's transaction (see database.py), so a unit is all-or-nothing, shares the group's one
COMMIT (and fsync) with its neighbours, and costs exactly the thread hop a write always cost.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.entities import EntityTx
from adapters.sqlite.episodes import EpisodeTx
from adapters.sqlite.outbox import OutboxTx
from adapters.sqlite.sessions import SessionTx
from adapters.sqlite.summaries import SummaryTx

T = TypeVar("T")


class SqliteTransaction:
    """The repositories of one unit, bound to the writer's connection while it runs."""

    __slots__ = ("sessions", "episodes", "entities", "summaries", "outbox")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.sessions = SessionTx(conn)
        self.episodes = EpisodeTx(conn)
        self.entities = EntityTx(conn)
        self.summaries = SummaryTx(conn)
        self.outbox = OutboxTx(conn)


class SqliteUnitOfWork:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def run(self, fn: Callable[[SqliteTransaction], T]) -> T:
        return await self._db.write(lambda conn: fn(SqliteTransaction(conn)))
