"""``SqliteStore``: the store's rooms on one SQLite file, bundled for wiring (not a port)."""

from __future__ import annotations

from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.entities import SqliteEntities
from adapters.sqlite.episodes import SqliteEpisodes
from adapters.sqlite.history import SqliteEvents, SqliteHistory
from adapters.sqlite.idempotency import SqliteIdempotency
from adapters.sqlite.keyword_index import SqliteKeywordIndex
from adapters.sqlite.listing import SqliteListing
from adapters.sqlite.operations import SqliteOperations
from adapters.sqlite.outbox import SqliteOutbox
from adapters.sqlite.schema import migrate
from adapters.sqlite.sessions import SqliteSessions
from adapters.sqlite.summaries import SqliteSummaries
from adapters.sqlite.unit_of_work import SqliteUnitOfWork
from domain.changes import DEFAULT_EVENT_RETENTION


class SqliteStore:
    """Every room over one ``SqliteDatabase`` (one writer thread, one reader pool)."""

    def __init__(self, db: SqliteDatabase, event_retention: int = DEFAULT_EVENT_RETENTION) -> None:
        self.database = db
        self.sessions = SqliteSessions(db)
        self.episodes = SqliteEpisodes(db)
        self.entities = SqliteEntities(db)
        self.summaries = SqliteSummaries(db)
        self.keywords = SqliteKeywordIndex(db)
        self.listing = SqliteListing(db)
        self.outbox = SqliteOutbox(db)
        self.operations = SqliteOperations(db)
        self.history = SqliteHistory(db)
        self.events = SqliteEvents(db)
        self.idempotency = SqliteIdempotency(db)
        self.uow = SqliteUnitOfWork(db, event_retention)

    @classmethod
    def open(cls, path: str, synchronous: str = "full",
             event_retention: int = DEFAULT_EVENT_RETENTION) -> "SqliteStore":
        """Open (creating and migrating as needed) the database at ``path``."""
        db = SqliteDatabase(path, synchronous)
        try:
            db.write_sync(migrate)
        except BaseException:
            db.close()
            raise
        return cls(db, event_retention)

    async def close(self) -> None:
        await self.operations.close()


