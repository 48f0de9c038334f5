"""Entities and relationships in memory."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from adapters.memory.state import MemoryState, live, page_of, stored
from domain.errors import Conflict, NotFound
from domain.models import Entity, EntityChanges, NewEntity, NewRelationship, Page, Relationship, Upserted, merged, utc_now
from ports.entities import Direction


def _owned(entity: Entity, user_id: str | None, global_records: bool) -> bool:
    return user_id is None or entity.user_id == user_id or (global_records and entity.user_id is None)


class MemoryEntities:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def get(self, entity_id: int) -> Entity | None:
        found = self._s.entities.get(entity_id)
        return found if found is not None and live(found) else None

    async def get_many(self, entity_ids: Sequence[int]) -> list[Entity]:
        return [self._s.entities[i] for i in dict.fromkeys(entity_ids) if i in self._s.entities
                and live(self._s.entities[i])]

    async def by_type(self, entity_type: str, limit: int, offset: int, user_id: str | None = None,
                      global_records: bool = True) -> Page[Entity]:
        ordered = sorted((e for e in self._s.entities.values()
                          if e.type == entity_type and live(e) and _owned(e, user_id, global_records)),
                         key=lambda e: (e.name, e.id))
        return page_of(ordered, limit, offset)

    async def find_by_name(self, name: str, limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        needle = name.casefold()
        found = [e for e in self._s.entities.values()
                 if needle in e.name.casefold() and live(e) and _owned(e, user_id, global_records)]
        found.sort(key=lambda e: (e.name.casefold() != needle, e.name, e.id))
        return found[:limit]

    async def mentioned_in(self, texts: Sequence[str], limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        haystack = "\n".join(texts).casefold()
        found = [e for e in sorted(self._s.entities.values(), key=lambda e: e.id)
                 if e.name and live(e) and _owned(e, user_id, global_records)
                 and re.search(rf"(?<!\w){re.escape(e.name.casefold())}(?!\w)", haystack)]
        return found[:limit]

    async def relationships_of(self, entity_id: int, direction: Direction,
                               as_of: str | None = None) -> list[Relationship]:
        def wanted(r: Relationship) -> bool:
            return ((direction in ("out", "both") and r.from_id == entity_id) or (
                direction in ("in", "both") and r.to_id == entity_id)) and (as_of is None or r.valid_at(as_of))

        return sorted(filter(wanted, self._s.relationships.values()), key=lambda r: (r.created_at, r.id))


class EntityTx:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    def get(self, entity_id: int) -> Entity | None:
        return self._s.entities.get(entity_id)

    def upsert(self, entity: NewEntity) -> Upserted[Entity]:
        now, expires = utc_now(), entity.expires_at
        key = (entity.user_id, entity.name, entity.type)
        old = next((e for e in self._s.entities.values() if (e.user_id, e.name, e.type) == key), None)
        if old is None:
            out = Entity(self._s.next_id("entities"), entity.name, entity.type, entity.notes,
                         stored(entity.metadata), now, now, entity.user_id, expires)
        else:
            out = replace(old, notes=entity.notes, metadata=stored(entity.metadata), updated_at=now,
                          expires_at=expires)
        self._s.entities[out.id] = out
        return Upserted(out, old is None, old)

    def update(self, entity_id: int, changes: EntityChanges) -> tuple[Entity, Entity] | None:
        old = self._s.entities.get(entity_id)
        if old is None:
            return None
        values = merged(changes, old)
        new = replace(old, **{**values, "metadata": stored(values["metadata"])}, updated_at=utc_now())
        if any(e.id != entity_id and (e.user_id, e.name, e.type) == (new.user_id, new.name, new.type)
               for e in self._s.entities.values()):
            raise Conflict(f"an entity named {new.name!r} of type {new.type!r} exists", field="name")
        self._s.entities[entity_id] = new
        return old, new

    def delete(self, entity_id: int) -> bool:
        if self._s.entities.pop(entity_id, None) is None:
            return False
        for rel_id in [i for i, r in self._s.relationships.items() if entity_id in (r.from_id, r.to_id)]:
            del self._s.relationships[rel_id]
        return True

    def relate(self, relationship: NewRelationship) -> Upserted[Relationship]:
        r = relationship
        for field, entity_id in (("fromId", r.from_id), ("toId", r.to_id)):
            if entity_id not in self._s.entities:
                raise NotFound(f"entity {entity_id} does not exist", field=field)
        old = next((x for x in self.edges(r.from_id, r.label, r.to_id) if x.valid_to is None and x.user_id == r.user_id),
                   None)
        if old is not None:
            return Upserted(self.set_edge(old.id, r.metadata, r.valid_from or old.valid_from, r.valid_to), False, old)
        return Upserted(self.add_edge(r), True)

    def add_edge(self, relationship: NewRelationship) -> Relationship:
        r = relationship
        out = Relationship(self._s.next_id("relationships"), r.from_id, r.to_id, r.label,
                           stored(r.metadata), utc_now(), r.user_id, valid_from=r.valid_from, valid_to=r.valid_to)
        self._s.relationships[out.id] = out
        return out

    def delete_owned(self, user_id: str) -> tuple[list[int], int]:
        ids = sorted(i for i, e in self._s.entities.items() if e.user_id == user_id)
        doomed = [i for i, r in self._s.relationships.items()
                  if r.user_id == user_id or r.from_id in ids or r.to_id in ids]
        for rel_id in doomed:
            del self._s.relationships[rel_id]
        for entity_id in ids:
            del self._s.entities[entity_id]
        return ids, len(doomed)

    def unrelate(self, from_id: int, to_id: int, label: str, user_id: str | None = None) -> bool:
        gone = [x.id for x in self.edges(from_id, label, to_id) if user_id is None or x.user_id == user_id]
        for rel_id in gone:
            del self._s.relationships[rel_id]
        return bool(gone)

    def edges(self, from_id: int, label: str, to_id: int | None = None) -> list[Relationship]:
        return sorted((x for x in self._s.relationships.values() if x.from_id == from_id and x.label == label
                       and (to_id is None or x.to_id == to_id)), key=lambda x: x.id)

    def edges_of(self, entity_id: int) -> list[Relationship]:
        return sorted((x for x in self._s.relationships.values() if entity_id in (x.from_id, x.to_id)),
                      key=lambda x: x.id)

    def set_edge(self, relationship_id: int, metadata: dict, valid_from: str | None,
                 valid_to: str | None) -> Relationship:
        out = replace(self._s.relationships[relationship_id], metadata=stored(metadata), valid_from=valid_from,
                      valid_to=valid_to)
        self._s.relationships[relationship_id] = out
        return out

    def delete_expired(self, now: str, limit: int) -> list[int]:
        table = self._s.entities
        doomed = sorted((r for r in table.values() if r.expires_at is not None and r.expires_at <= now),
                        key=lambda r: (r.expires_at, r.id))[:limit]
        for record in doomed:
            self.delete(record.id)
        return [r.id for r in doomed]
