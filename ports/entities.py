"""Entities (named things, unique by name and type) and the labelled relationships between them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from domain.models import Entity, EntityChanges, NewEntity, NewRelationship, Page, Relationship, Upserted

Direction = Literal["out", "in", "both"]


class Entities(Protocol):
    """Reads. Unknown ids are left out of lists and read ``None`` one at a time."""

    async def get(self, entity_id: int) -> Entity | None: ...

    async def get_many(self, entity_ids: Sequence[int]) -> list[Entity]:
        """The entities that exist among ``entity_ids``, in the order given (each once)."""
        ...

    async def by_type(self, entity_type: str, limit: int, offset: int, user_id: str | None = None,
                      global_records: bool = True) -> Page[Entity]:
        """Entities of one type ordered by name, then id, with the total count; with ``user_id``
        only that user's entities, and the global ones (no owner) unless ``global_records`` is False."""
        ...

    async def find_by_name(self, name: str, limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        """Case-insensitive (Unicode casefold) substring match on name, ``%``/``_`` literal;
        exact matches first, then by name, then id; ``user_id`` and ``global_records`` as in ``by_type``."""
        ...

    async def mentioned_in(self, texts: Sequence[str], limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        """Entities whose name occurs (case-insensitively, as a whole word) in any of ``texts``, by id;
        with ``user_id``, only that user's entities and the global ones (no owner) unless
        ``global_records`` is False."""
        ...

    async def relationships_of(self, entity_id: int, direction: Direction,
                               as_of: str | None = None) -> list[Relationship]:
        """Edges out of / into / both ways of an entity, oldest first (created_at, then id); with
        ``as_of`` (a canonical timestamp) only those valid then (``Relationship.valid_at``)."""
        ...


class EntityWrites(Protocol):
    """Synchronous writes, valid only inside ``UnitOfWork.run``."""

    def get(self, entity_id: int) -> Entity | None:
        """The entity as this unit sees it."""
        ...

    def upsert(self, entity: NewEntity) -> Upserted[Entity]:
        """Create by (user_id, name, type) — ``user_id`` None is the global entity of that name and
        type, as before owners existed — or replace notes/metadata/expires_at of the existing one
        (``created`` False, ``before`` the entity as it was). An expiresAt that is not a timestamp
        raises ``Invalid`` (``expiresAt``)."""
        ...

    def update(self, entity_id: int, changes: EntityChanges) -> tuple[Entity, Entity] | None:
        """Apply the non-``None`` changes and bump ``updated_at``; returns (before, after), or ``None``
        for an unknown id. A name/type that another entity already has raises ``Conflict`` (field
        ``name``). The keyword index follows at once."""
        ...

    def delete(self, entity_id: int) -> bool:
        """Delete the entity and every relationship from or to it; ``False`` when unknown."""
        ...

    def relate(self, relationship: NewRelationship) -> Upserted[Relationship]:
        """Create the open edge (``valid_to`` None) of (from_id, to_id, label) with the new edge's
        owner (``user_id``, None: global), or replace its metadata, validity (``valid_from`` kept
        when not given) and so maybe close it (``created`` False, ``before`` as it was). Each owner
        has at most one open edge of a triple; closed ones are kept beside it. An unknown end
        raises ``NotFound`` (field ``fromId`` / ``toId``)."""
        ...

    def unrelate(self, from_id: int, to_id: int, label: str, user_id: str | None = None) -> bool:
        """Delete the edges of (from_id, to_id, label), open and closed — with ``user_id``, only
        that user's; ``False`` when none."""
        ...

    def edges(self, from_id: int, label: str, to_id: int | None = None) -> list[Relationship]:
        """Edges out of ``from_id`` with ``label`` (and to ``to_id`` when given), by id."""
        ...

    def add_edge(self, relationship: NewRelationship) -> Relationship:
        """Insert a CLOSED edge (``valid_to`` given) beside the triple's others; both ends exist."""
        ...

    def edges_of(self, entity_id: int) -> list[Relationship]:
        """Every edge from or to the entity, by id (what deleting it deletes)."""
        ...

    def set_edge(self, relationship_id: int, metadata: dict, valid_from: str | None,
                 valid_to: str | None) -> Relationship:
        """Replace an existing edge's metadata and validity; returns it as stored."""
        ...

    def delete_owned(self, user_id: str) -> tuple[list[int], int]:
        """Delete every entity of ``user_id`` (with every relationship from or to one) and every
        relationship of ``user_id``; returns (the entity ids, relationships deleted). Global
        entities stay. Enqueues nothing."""
        ...

    def delete_expired(self, now: str, limit: int) -> list[int]:
        """Delete up to ``limit`` records whose ``expires_at`` is at or before ``now`` (store format),
        oldest expiry first, with their keyword rows and stored embeddings; returns their ids.
        Enqueues nothing."""
        ...
