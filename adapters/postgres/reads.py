"""Read helpers shared by the PostgreSQL rooms: one row, many rows, rows by id, a counted page."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from adapters.postgres.database import PostgresDatabase
from adapters.postgres.rows import columns
from domain.models import Page, utc_now


class Reads:
    """Base of a room: holds the database and answers its reads off the event loop."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    async def _one(self, sql, params, mapper):
        def op(conn: psycopg.Connection):
            row = conn.execute(sql, params).fetchone()
            return mapper(row) if row else None

        return await self._db.read(op)

    async def _all(self, sql, params, mapper) -> list:
        return await self._db.read(lambda conn: [mapper(r) for r in conn.execute(sql, params).fetchall()])

    async def _many_by_id(self, table: str, ids: Sequence[int], mapper, live: bool = False) -> list:
        """Rows by id in the order given; with ``live``, expired rows (``expires_at`` past) are left out."""
        if not ids:
            return []
        wanted = list(dict.fromkeys(ids))
        sql = f"SELECT {columns(table)} FROM {table} WHERE id = ANY(%s)"
        params: list = [wanted]
        if live:
            sql += " AND (expires_at IS NULL OR expires_at > %s)"
            params.append(utc_now())
        found = await self._all(sql, params, mapper)
        by_id = {item.id: item for item in found}
        return [by_id[i] for i in wanted if i in by_id]

    async def _page(self, table, where, params, order, limit, offset, mapper) -> Page:
        def op(conn: psycopg.Connection) -> Page:
            total = conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]
            found = conn.execute(
                f"SELECT {columns(table)} FROM {table} WHERE {where} ORDER BY {order} LIMIT %s OFFSET %s",
                (*params, limit, offset)).fetchall()
            return Page([mapper(r) for r in found], total, limit, offset)

        return await self._db.read(op)


class Writes:
    """Base of a room's writes: bound to the unit of work's connection while it runs."""

    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn

    def _delete(self, table: str, item_id: int) -> bool:
        return self._conn.execute(f"DELETE FROM {table} WHERE id = %s", (item_id,)).rowcount > 0
