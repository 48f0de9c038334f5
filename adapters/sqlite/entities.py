"""Entities and relationships on SQLite."""

from __future__ import annotations

import re
from collections.abc import Sequence

from adapters.sqlite import rows
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.reads import Reads, Writes
from domain.errors import Conflict, NotFound
from domain.models import Entity, EntityChanges, NewEntity, NewRelationship, Page, Relationship, Upserted, merged, utc_now
from ports.entities import Direction

_EDGES = {"out": "from_id = ?", "in": "to_id = ?", "both": "(from_id = ? OR to_id = ?)"}


class SqliteEntities(Reads):
    async def get(self, entity_id: int) -> Entity | None:
        return await self._one(f"SELECT * FROM entities WHERE id = ? AND {rows.live()}", (entity_id, utc_now()),
                               rows.entity_of)

    async def get_many(self, entity_ids: Sequence[int]) -> list[Entity]:
        return await self._many_by_id("entities", entity_ids, rows.entity_of, live=True)

    async def by_type(self, entity_type: str, limit: int, offset: int, user_id: str | None = None,
                      global_records: bool = True) -> Page[Entity]:
        mine, owner = rows.owned(user_id, global_records)
        return await self._page("entities", f"type = ? AND {rows.live()}{mine}", (entity_type, utc_now(), *owner),
                                "name, id", limit, offset, rows.entity_of)

    async def find_by_name(self, name: str, limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        # instr, not LIKE: % and _ in a name are literal, and casefold() folds beyond ASCII.
        needle = name.casefold()
        mine, owner = rows.owned(user_id, global_records)
        return await self._all(
            f"SELECT * FROM entities WHERE instr(casefold(name), ?) > 0 AND {rows.live()}{mine}"
            " ORDER BY casefold(name) = ? DESC, name, id LIMIT ?+0",
            (needle, utc_now(), *owner, needle, limit), rows.entity_of,
        )

    async def mentioned_in(self, texts: Sequence[str], limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        haystack = "\n".join(texts).casefold()
        if not haystack.strip():
            return []
        mine, owner = rows.owned(user_id, global_records)
        found = await self._all(
            f"SELECT * FROM entities WHERE length(name) > 0 AND instr(?, casefold(name)) > 0 AND {rows.live()}{mine}"
            " ORDER BY id",
            (haystack, utc_now(), *owner), rows.entity_of,
        )
        words = [e for e in found if re.search(rf"(?<!\w){re.escape(e.name.casefold())}(?!\w)", haystack)]
        return words[:limit]

    async def relationships_of(self, entity_id: int, direction: Direction,
                               as_of: str | None = None) -> list[Relationship]:
        params: tuple = (entity_id, entity_id) if direction == "both" else (entity_id,)
        valid = ""
        if as_of is not None:
            valid = " AND (valid_from IS NULL OR valid_from <= ?) AND (valid_to IS NULL OR valid_to > ?)"
            params += (as_of, as_of)
        return await self._all(
            f"SELECT * FROM relationships WHERE {_EDGES[direction]}{valid} ORDER BY created_at, id", params,
            rows.relationship_of,
        )


class EntityTx(Writes):
    __slots__ = ()

    def get(self, entity_id: int) -> Entity | None:
        row = self._conn.execute("SELECT * FROM entities WHERE id = ?", (entity_id,)).fetchone()
        return rows.entity_of(row) if row else None

    def upsert(self, entity: NewEntity) -> Upserted[Entity]:
        conn, now = self._conn, utc_now()
        expires = entity.expires_at
        row = conn.execute(  # ifnull(user_id, ''): the unique index's key, so the lookup uses it
            "SELECT * FROM entities WHERE ifnull(user_id, '') = ? AND name = ? AND type = ?",
            (entity.user_id or "", entity.name, entity.type),
        ).fetchone()
        before = None
        if row is None:
            cur = conn.execute(
                "INSERT INTO entities(name, type, notes, metadata, created_at, updated_at, user_id, expires_at)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (entity.name, entity.type, entity.notes, rows.dump_metadata(entity.metadata), now, now,
                 entity.user_id, expires),
            )
            entity_id, created = cur.lastrowid, True
        else:
            entity_id, created, before = row["id"], False, rows.entity_of(row)
            conn.execute(
                "UPDATE entities SET notes = ?, metadata = ?, updated_at = ?, expires_at = ? WHERE id = ?",
                (entity.notes, rows.dump_metadata(entity.metadata), now, expires, entity_id),
            )
        stored = conn.execute("SELECT * FROM entities WHERE id = ?", (entity_id,)).fetchone()
        return Upserted(rows.entity_of(stored), created, before)

    def update(self, entity_id: int, changes: EntityChanges) -> tuple[Entity, Entity] | None:
        conn = self._conn
        row = conn.execute("SELECT * FROM entities WHERE id = ?", (entity_id,)).fetchone()
        if row is None:
            return None
        old = rows.entity_of(row)
        new = merged(changes, old)
        name, kind, notes = new["name"], new["type"], new["notes"]
        meta = rows.dump_metadata(new["metadata"])
        try:
            conn.execute("UPDATE entities SET name = ?, type = ?, notes = ?, metadata = ?, updated_at = ? WHERE id = ?",
                         (name, kind, notes, meta, utc_now(), entity_id))
        except sqlite3.IntegrityError:
            raise Conflict(f"an entity named {name!r} of type {kind!r} exists", field="name") from None
        return old, rows.entity_of(conn.execute("SELECT * FROM entities WHERE id = ?", (entity_id,)).fetchone())

    def delete(self, entity_id: int) -> bool:
        return self._delete("entities", entity_id)  # relationships go by ON DELETE CASCADE

    def relate(self, relationship: NewRelationship) -> Upserted[Relationship]:
        r, conn = relationship, self._conn
        for field, entity_id in (("fromId", r.from_id), ("toId", r.to_id)):
            if conn.execute("SELECT 1 FROM entities WHERE id = ?", (entity_id,)).fetchone() is None:
                raise NotFound(f"entity {entity_id} does not exist", field=field)
        row = conn.execute(
            "SELECT * FROM relationships WHERE from_id = ? AND to_id = ? AND label = ? AND user_id IS ?"
            " AND valid_to IS NULL", (r.from_id, r.to_id, r.label, r.user_id),
        ).fetchone()
        if row is not None:
            before = rows.relationship_of(row)
            after = self.set_edge(before.id, r.metadata, r.valid_from or before.valid_from, r.valid_to)
            return Upserted(after, False, before)
        return Upserted(self.add_edge(r), True)

    def add_edge(self, relationship: NewRelationship) -> Relationship:
        r = relationship
        cur = self._conn.execute(
            "INSERT INTO relationships(from_id, to_id, label, metadata, created_at, valid_from, valid_to, user_id)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (r.from_id, r.to_id, r.label, rows.dump_metadata(r.metadata), utc_now(), r.valid_from, r.valid_to,
             r.user_id),
        )
        return self._edge(cur.lastrowid)

    def delete_owned(self, user_id: str) -> tuple[list[int], int]:
        conn = self._conn
        ids = [r[0] for r in conn.execute("SELECT id FROM entities WHERE user_id = ? ORDER BY id", (user_id,))]
        edges = conn.execute(
            "DELETE FROM relationships WHERE user_id = ? OR from_id IN (SELECT id FROM entities WHERE user_id = ?)"
            " OR to_id IN (SELECT id FROM entities WHERE user_id = ?)", (user_id, user_id, user_id),
        ).rowcount
        conn.execute("DELETE FROM entities WHERE user_id = ?", (user_id,))
        return ids, edges

    def unrelate(self, from_id: int, to_id: int, label: str, user_id: str | None = None) -> bool:
        mine, owner = rows.owned(user_id, global_records=False)
        return self._conn.execute(
            f"DELETE FROM relationships WHERE from_id = ? AND to_id = ? AND label = ?{mine}", (from_id, to_id, label, *owner)
        ).rowcount > 0

    def delete_expired(self, now: str, limit: int) -> list[int]:
        return [r[0] for r in self._conn.execute(
            "DELETE FROM entities WHERE id IN (SELECT id FROM entities WHERE expires_at IS NOT NULL AND expires_at <= ?"
            " ORDER BY expires_at, id LIMIT ?+0) RETURNING id", (now, limit))]

    def edges(self, from_id: int, label: str, to_id: int | None = None) -> list[Relationship]:
        sql, params = "SELECT * FROM relationships WHERE from_id = ? AND label = ?", [from_id, label]
        if to_id is not None:
            sql, params = sql + " AND to_id = ?", [*params, to_id]
        return [rows.relationship_of(x) for x in self._conn.execute(sql + " ORDER BY id", params)]

    def edges_of(self, entity_id: int) -> list[Relationship]:
        return [rows.relationship_of(x) for x in self._conn.execute(
            "SELECT * FROM relationships WHERE from_id = ? OR to_id = ? ORDER BY id", (entity_id, entity_id))]

    def set_edge(self, relationship_id: int, metadata: dict, valid_from: str | None,
                 valid_to: str | None) -> Relationship:
        self._conn.execute(
            "UPDATE relationships SET metadata = ?, valid_from = ?, valid_to = ? WHERE id = ?",
            (rows.dump_metadata(metadata), valid_from, valid_to, relationship_id),
        )
        return self._edge(relationship_id)

    def _edge(self, relationship_id: int) -> Relationship:
        return rows.relationship_of(
            self._conn.execute("SELECT * FROM relationships WHERE id = ?", (relationship_id,)).fetchone())
