"""``MemoryStore``: the store's rooms in plain dicts, a supported test double (not a port).

Same contracts as the SQLite rooms (each contract suite runs over both): cascades, uniqueness,
upserts, pagination order, the outbox, all-or-nothing units of work.
"""

from __future__ import annotations

from adapters.memory.entities import MemoryEntities
from adapters.memory.episodes import MemoryEpisodes
from adapters.memory.history import MemoryEvents, MemoryHistory
from adapters.memory.idempotency import MemoryIdempotency
from adapters.memory.keyword_index import MemoryKeywordIndex
from adapters.memory.listing import MemoryListing
from adapters.memory.operations import MemoryOperations
from adapters.memory.outbox import MemoryOutbox
from adapters.memory.sessions import MemorySessions
from adapters.memory.state import MemoryState
from adapters.memory.summaries import MemorySummaries
from adapters.memory.unit_of_work import MemoryUnitOfWork
from domain.changes import DEFAULT_EVENT_RETENTION


class MemoryStore:
    def __init__(self, event_retention: int = DEFAULT_EVENT_RETENTION) -> None:
        self.state = state = MemoryState()
        self.sessions = MemorySessions(state)
        self.episodes = MemoryEpisodes(state)
        self.entities = MemoryEntities(state)
        self.summaries = MemorySummaries(state)
        self.keywords = MemoryKeywordIndex(state)
        self.listing = MemoryListing(state)
        self.outbox = MemoryOutbox(state)
        self.operations = MemoryOperations(state)
        self.history = MemoryHistory(state)
        self.events = MemoryEvents(state)
        self.idempotency = MemoryIdempotency(state)
        self.uow = MemoryUnitOfWork(state, event_retention)

    async def close(self) -> None:
        await self.operations.close()


