"""Entities and relationships on PostgreSQL.

``name_folded`` keeps each name casefolded by Python (``str.casefold``), so name search folds
exactly as the other adapters do, whatever the database's locale.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import psycopg

from adapters.postgres import rows
from adapters.postgres.episodes import expire
from adapters.postgres.reads import Reads, Writes
from domain.errors import Conflict, NotFound
from domain.models import Entity, EntityChanges, NewEntity, NewRelationship, Page, Relationship, Upserted, merged, utc_now
from ports.entities import Direction

_EDGES = {"out": "from_id = %s", "in": "to_id = %s", "both": "(from_id = %s OR to_id = %s)"}
_COLUMNS = rows.columns("entities")


class PostgresEntities(Reads):
    async def get(self, entity_id: int) -> Entity | None:
        return await self._one(f"SELECT {_COLUMNS} FROM entities WHERE id = %s AND {rows.live()}",
                               (entity_id, utc_now()), rows.entity_of)

    async def get_many(self, entity_ids: Sequence[int]) -> list[Entity]:
        return await self._many_by_id("entities", entity_ids, rows.entity_of, live=True)

    async def by_type(self, entity_type: str, limit: int, offset: int, user_id: str | None = None,
                      global_records: bool = True) -> Page[Entity]:
        mine, owner = rows.owned(user_id, global_records)
        return await self._page("entities", f"type = %s AND {rows.live()}{mine}", (entity_type, utc_now(), *owner),
                                "name COLLATE \"C\", id", limit, offset, rows.entity_of)

    async def find_by_name(self, name: str, limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        # strpos, not LIKE: % and _ in a name are literal.
        needle = name.casefold()
        mine, owner = rows.owned(user_id, global_records)
        return await self._all(
            f"SELECT {_COLUMNS} FROM entities WHERE strpos(name_folded, %s) > 0 AND {rows.live()}{mine}"
            " ORDER BY name_folded = %s DESC, name COLLATE \"C\", id LIMIT %s",
            (needle, utc_now(), *owner, needle, limit), rows.entity_of)

    async def mentioned_in(self, texts: Sequence[str], limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        haystack = "\n".join(texts).casefold()
        if not haystack.strip():
            return []
        mine, owner = rows.owned(user_id, global_records)
        found = await self._all(
            f"SELECT {_COLUMNS} FROM entities WHERE length(name) > 0 AND strpos(%s, name_folded) > 0"
            f" AND {rows.live()}{mine} ORDER BY id",
            (haystack, utc_now(), *owner), rows.entity_of)
        words = [e for e in found if re.search(rf"(?<!\w){re.escape(e.name.casefold())}(?!\w)", haystack)]
        return words[:limit]

    async def relationships_of(self, entity_id: int, direction: Direction,
                               as_of: str | None = None) -> list[Relationship]:
        params: tuple = (entity_id, entity_id) if direction == "both" else (entity_id,)
        valid = ""
        if as_of is not None:
            valid = " AND (valid_from IS NULL OR valid_from <= %s) AND (valid_to IS NULL OR valid_to > %s)"
            params += (as_of, as_of)
        return await self._all(f"SELECT * FROM relationships WHERE {_EDGES[direction]}{valid} ORDER BY created_at, id",
                               params, rows.relationship_of)


class EntityTx(Writes):
    __slots__ = ()

    def get(self, entity_id: int) -> Entity | None:
        row = self._conn.execute(f"SELECT {_COLUMNS} FROM entities WHERE id = %s", (entity_id,)).fetchone()
        return rows.entity_of(row) if row else None

    def upsert(self, entity: NewEntity) -> Upserted[Entity]:
        conn, now = self._conn, utc_now()
        expires = entity.expires_at
        row = conn.execute(  # coalesce(user_id, ''): the unique index's key, so the lookup uses it
            f"SELECT {_COLUMNS} FROM entities WHERE coalesce(user_id, '') = %s AND name = %s AND type = %s FOR UPDATE",
            (entity.user_id or "", entity.name, entity.type)).fetchone()
        before = None
        if row is None:
            entity_id, created = conn.execute(
                "INSERT INTO entities(name, name_folded, type, notes, metadata, created_at, updated_at, user_id,"
                " expires_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (entity.name, entity.name.casefold(), entity.type, entity.notes, rows.jsonb(entity.metadata or {}),
                 now, now, entity.user_id, expires)).fetchone()[0], True
        else:
            entity_id, created, before = row["id"], False, rows.entity_of(row)
            conn.execute("UPDATE entities SET notes = %s, metadata = %s, updated_at = %s, expires_at = %s WHERE id = %s",
                         (entity.notes, rows.jsonb(entity.metadata or {}), now, expires, entity_id))
        return Upserted(self.get(entity_id), created, before)

    def update(self, entity_id: int, changes: EntityChanges) -> tuple[Entity, Entity] | None:
        old = self.get(entity_id)
        if old is None:
            return None
        new = merged(changes, old)
        name, kind, notes = new["name"], new["type"], new["notes"]
        try:
            with self._conn.transaction():  # a savepoint: a conflict leaves the unit usable
                self._conn.execute(
                    "UPDATE entities SET name = %s, name_folded = %s, type = %s, notes = %s, metadata = %s,"
                    " updated_at = %s WHERE id = %s",
                    (name, name.casefold(), kind, notes, rows.jsonb(new["metadata"] or {}), utc_now(), entity_id))
        except psycopg.errors.UniqueViolation:
            raise Conflict(f"an entity named {name!r} of type {kind!r} exists", field="name") from None
        return old, self.get(entity_id)

    def delete(self, entity_id: int) -> bool:
        return self._delete("entities", entity_id)  # relationships go by ON DELETE CASCADE

    def relate(self, relationship: NewRelationship) -> Upserted[Relationship]:
        r, conn = relationship, self._conn
        for field, entity_id in (("fromId", r.from_id), ("toId", r.to_id)):
            if conn.execute("SELECT 1 FROM entities WHERE id = %s", (entity_id,)).fetchone() is None:
                raise NotFound(f"entity {entity_id} does not exist", field=field)
        row = conn.execute(
            "SELECT * FROM relationships WHERE from_id = %s AND to_id = %s AND label = %s"
            " AND user_id IS NOT DISTINCT FROM %s AND valid_to IS NULL FOR UPDATE",
            (r.from_id, r.to_id, r.label, r.user_id)).fetchone()
        if row is not None:
            before = rows.relationship_of(row)
            after = self.set_edge(before.id, r.metadata, r.valid_from or before.valid_from, r.valid_to)
            return Upserted(after, False, before)
        return Upserted(self.add_edge(r), True)

    def add_edge(self, relationship: NewRelationship) -> Relationship:
        r = relationship
        return rows.relationship_of(self._conn.execute(
            "INSERT INTO relationships(from_id, to_id, label, metadata, created_at, valid_from, valid_to, user_id)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,%s) RETURNING *",
            (r.from_id, r.to_id, r.label, rows.jsonb(r.metadata or {}), utc_now(), r.valid_from, r.valid_to,
             r.user_id)).fetchone())

    def delete_owned(self, user_id: str) -> tuple[list[int], int]:
        conn = self._conn
        ids = [r[0] for r in conn.execute("SELECT id FROM entities WHERE user_id = %s ORDER BY id", (user_id,))]
        edges = conn.execute(
            "DELETE FROM relationships WHERE user_id = %s OR from_id IN (SELECT id FROM entities WHERE user_id = %s)"
            " OR to_id IN (SELECT id FROM entities WHERE user_id = %s)", (user_id, user_id, user_id)).rowcount
        conn.execute("DELETE FROM entities WHERE user_id = %s", (user_id,))
        return ids, edges

    def unrelate(self, from_id: int, to_id: int, label: str, user_id: str | None = None) -> bool:
        mine, owner = rows.owned(user_id, global_records=False)
        return self._conn.execute(f"DELETE FROM relationships WHERE from_id = %s AND to_id = %s AND label = %s{mine}",
                                  (from_id, to_id, label, *owner)).rowcount > 0

    def delete_expired(self, now: str, limit: int) -> list[int]:
        return expire(self._conn, "entities", now, limit)

    def edges(self, from_id: int, label: str, to_id: int | None = None) -> list[Relationship]:
        sql, params = "SELECT * FROM relationships WHERE from_id = %s AND label = %s", [from_id, label]
        if to_id is not None:
            sql, params = sql + " AND to_id = %s", [*params, to_id]
        return [rows.relationship_of(x) for x in self._conn.execute(sql + " ORDER BY id", params)]

    def edges_of(self, entity_id: int) -> list[Relationship]:
        return [rows.relationship_of(x) for x in self._conn.execute(
            "SELECT * FROM relationships WHERE from_id = %s OR to_id = %s ORDER BY id", (entity_id, entity_id))]

    def set_edge(self, relationship_id: int, metadata: dict, valid_from: str | None,
                 valid_to: str | None) -> Relationship:
        return rows.relationship_of(self._conn.execute(
            "UPDATE relationships SET metadata = %s, valid_from = %s, valid_to = %s WHERE id = %s RETURNING *",
            (rows.jsonb(metadata or {}), valid_from, valid_to, relationship_id)).fetchone())
