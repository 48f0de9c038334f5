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

    async def by_type(self, entity_type: str, limit: int, offset: int) -> Page[Entity]:
        """Entities of one type ordered by name, then id, with the total count."""
        ...

    async def find_by_name(self, name: str, limit: int) -> list[Entity]:
        """Case-insensitive (Unicode casefold) substring match on name, ``%``/``_`` literal;
        exact matches first, then by name, then id."""
        ...

    async def mentioned_in(self, texts: Sequence[str], limit: int, user_id: str | None = None) -> list[Entity]:
        """Entities whose name occurs (case-insensitively, as a whole word) in any of ``texts``, by id;
        with ``user_id``, only that user's entities and the global ones (no owner)."""
        ...

    async def relationships_of(self, entity_id: int, direction: Direction) -> list[Relationship]:
        """Edges out of / into / both ways of an entity, oldest first (created_at, then id)."""
        ...


class EntityWrites(Protocol):
    """Synchronous writes, valid only inside ``UnitOfWork.run``."""

    def upsert(self, entity: NewEntity) -> Upserted[Entity]:
        """Create by (user_id, name, type) — ``user_id`` None is the global entity of that name and
        type, as before owners existed — or replace notes/metadata/expires_at of the existing one
        (``created`` False). An expiresAt that is not a timestamp raises ``Invalid`` (``expiresAt``)."""
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
        """Create by (from_id, to_id, label) or replace its metadata; an unknown end raises
        ``NotFound`` (field ``fromId`` / ``toId``)."""
        ...

    def unrelate(self, from_id: int, to_id: int, label: str) -> bool: ...

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
