"""The store's rooms, as the services receive them: one handle, one attribute per port.

Not a port of its own (it has no methods): a service names the rooms it uses, e.g.
``store.episodes.get`` and ``store.uow.run``. Each adapter set bundles its rooms in one object
(``adapters.sqlite.SqliteStore``, ``adapters.memory.MemoryStore``).
"""

from __future__ import annotations

from typing import Protocol

from ports.entities import Entities
from ports.episodes import Episodes
from ports.events import Events
from ports.history import History
from ports.idempotency import IdempotencyRecords
from ports.keyword_index import KeywordIndex
from ports.listing import Listing
from ports.operations import StoreOperations
from ports.outbox import EmbeddingOutbox
from ports.sessions import Sessions
from ports.summaries import Summaries
from ports.unit_of_work import UnitOfWork


class Store(Protocol):
    @property
    def sessions(self) -> Sessions: ...
    @property
    def episodes(self) -> Episodes: ...
    @property
    def entities(self) -> Entities: ...
    @property
    def summaries(self) -> Summaries: ...
    @property
    def keywords(self) -> KeywordIndex: ...
    @property
    def listing(self) -> Listing: ...
    @property
    def outbox(self) -> EmbeddingOutbox: ...
    @property
    def operations(self) -> StoreOperations: ...
    @property
    def history(self) -> History: ...
    @property
    def events(self) -> Events: ...
    @property
    def idempotency(self) -> IdempotencyRecords: ...
    @property
    def uow(self) -> UnitOfWork: ...
