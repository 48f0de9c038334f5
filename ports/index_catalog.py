"""The IndexCatalog port: what the system of record knows about the vector index.

The vector collections are derived data; this port is where their provenance and their source
live: the index manifest (which embedder made the vectors, which generation of each collection is
active) and each record's stored embedding, so an index can be rebuilt without the embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from domain.vectors import ModelRef

GenerationState = Literal["building", "active", "retired"]


@dataclass(frozen=True, slots=True)
class Generation:
    """One physical collection built for logical ``collection`` by the model ``model_id``."""

    id: int
    collection: str
    physical: str
    model_id: int
    model: ModelRef
    state: GenerationState
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class EmbeddingRow:
    """A record as a build needs it: its id, its point payload, and its stored embedding when one
    made by the requested model exists (``None`` otherwise: it must be embedded first)."""

    id: int
    payload: dict[str, Any] = field(default_factory=dict)
    vector: bytes | None = None


class IndexCatalog(Protocol):
    """The index manifest (models, generations, reindex requests), kept in the same store (and
    transactions) as the records; its adapters also implement ``StoredEmbeddings`` below.

    Stored embeddings follow their record: deleting the record deletes it, and changing the text
    it was made from forgets it (a stale vector is never served from the store).
    """

    async def store_id(self) -> str:
        """A random identifier of this store, fixed at creation; physical collection names carry
        it so two stores sharing one index location never touch each other's collections."""
        ...

    async def model_id(self, model: ModelRef) -> int:
        """The id of ``model`` in the manifest, recorded on first use."""
        ...

    async def generations(self) -> list[Generation]:
        """Every generation recorded, oldest first."""
        ...

    async def add_generation(self, collection: str, model_id: int, physical: str, reason: str) -> Generation:
        """Record a new generation in state ``building``."""
        ...

    async def activate(self, generation_id: int) -> None:
        """Make this generation the active one of its collection and retire the previous active
        one, in one transaction (the atomic switch)."""
        ...

    async def forget(self, generation_id: int) -> None:
        """Remove a generation from the manifest (after its collection was dropped)."""
        ...

    async def request_reindex(self, collections: Sequence[str]) -> None:
        """Ask whoever maintains the index (the running service, or an offline reindex) to build
        new generations of these collections; asking again before it is taken adds nothing."""
        ...

    async def take_reindex_request(self) -> list[str]:
        """The collections asked for by ``request_reindex`` since the last call (then cleared)."""
        ...


class StoredEmbeddings(Protocol):
    """Each record's embedding kept in the system of record, and the record ids to compare the
    index with: what rebuilds and repairs read instead of the embedder. Every catalog adapter
    implements it beside ``IndexCatalog`` (one object, two roles)."""

    async def store_embeddings(self, collection: str, model_id: int, vectors: Sequence[tuple[int, bytes]]) -> None:
        """Keep these records' embeddings (``encode_vector`` blobs); ids of records that no
        longer exist are ignored."""
        ...

    async def embedding_rows(self, collection: str, model_id: int, after_id: int, limit: int) -> list[EmbeddingRow]:
        """Up to ``limit`` records with id above ``after_id``, by id; ``vector`` is set when a
        stored embedding by ``model_id`` exists."""
        ...

    async def embeddings_of(self, collection: str, model_id: int, ids: Sequence[int]) -> list[EmbeddingRow]:
        """The records among ``ids`` that exist, as in ``embedding_rows``."""
        ...

    async def row_ids(self, collection: str) -> list[int]:
        """Every record id of ``collection``, ascending."""
        ...

    async def pending_ids(self, collection: str) -> set[int]:
        """Record ids with an outbox job not yet applied (their points may lawfully differ)."""
        ...

    async def expired_ids(self, collection: str) -> set[int]:
        """Record ids whose ``expires_at`` has passed but that the expiry sweep has not purged yet:
        no search returns them, so a missing point of theirs is no divergence."""
        ...

    async def missing_embeddings(self, collection: str, model_id: int) -> int:
        """How many records have no stored embedding by ``model_id``."""
        ...
