"""``PostgresStore``: the store's rooms on one PostgreSQL database, bundled for wiring (not a port)."""

from __future__ import annotations

from adapters.postgres.database import PostgresDatabase
from adapters.postgres.entities import PostgresEntities
from adapters.postgres.episodes import PostgresEpisodes
from adapters.postgres.history import PostgresEvents, PostgresHistory
from adapters.postgres.idempotency import PostgresIdempotency
from adapters.postgres.keyword_index import PostgresKeywordIndex
from adapters.postgres.listing import PostgresListing
from adapters.postgres.operations import PostgresOperations
from adapters.postgres.outbox import PostgresOutbox
from adapters.postgres.schema import migrate
from adapters.postgres.sessions import PostgresSessions
from adapters.postgres.summaries import PostgresSummaries
from adapters.postgres.unit_of_work import PostgresUnitOfWork
from domain.changes import DEFAULT_EVENT_RETENTION


class PostgresStore:
    """Every room over one ``PostgresDatabase``; any number of processes may open the same one."""

    def __init__(self, db: PostgresDatabase, event_retention: int = DEFAULT_EVENT_RETENTION) -> None:
        self.database = db
        self.sessions = PostgresSessions(db)
        self.episodes = PostgresEpisodes(db)
        self.entities = PostgresEntities(db)
        self.summaries = PostgresSummaries(db)
        self.keywords = PostgresKeywordIndex(db)
        self.listing = PostgresListing(db)
        self.outbox = PostgresOutbox(db)
        self.operations = PostgresOperations(db)
        self.history = PostgresHistory(db)
        self.events = PostgresEvents(db)
        self.idempotency = PostgresIdempotency(db)
        self.uow = PostgresUnitOfWork(db, event_retention)

    @classmethod
    def open(cls, url: str, event_retention: int = DEFAULT_EVENT_RETENTION) -> "PostgresStore":
        """Connect to the database at ``url`` and bring its schema up to date."""
        db = PostgresDatabase(url)
        try:
            db.write_sync(migrate)
        except BaseException:
            db.close()
            raise
        return cls(db, event_retention)

    async def close(self) -> None:
        await self.operations.close()
