"""Read helpers shared by the SQLite rooms: one row, many rows, rows by id, a counted page."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.driver import sqlite3
from domain.models import Page, utc_now


def in_list(ids: Sequence[int]) -> str:
    return ",".join("?" * len(ids))


class Reads:
    """Base of a room: holds the database and answers its reads without blocking the loop."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def _one(self, sql, params, mapper):
        """One row by primary key or unique index: a point read, answered without a thread hop."""
        def op(conn: sqlite3.Connection):
            row = conn.execute(sql, params).fetchone()
            return mapper(row) if row else None

        return await self._db.read_point(op)

    async def _all(self, sql, params, mapper) -> list:
        """Rows of a bounded query: on the loop while short, else on a reader (``read_short``)."""
        return await self._db.read_short(lambda conn: [mapper(r) for r in conn.execute(sql, params).fetchall()],
                                         site=sql)

    async def _many_by_id(self, table: str, ids: Sequence[int], mapper, live: bool = False) -> list:
        """Rows by id in the order given; with ``live``, expired rows (``expires_at`` past) are left out."""
        if not ids:
            return []
        wanted = list(dict.fromkeys(ids))
        sql = f"SELECT * FROM {table} WHERE id IN ({in_list(wanted)})"
        params: list = list(wanted)
        if live:
            sql += " AND (expires_at IS NULL OR expires_at > ?)"
            params.append(utc_now())
        found = await self._all(sql, params, mapper)
        by_id = {item.id: item for item in found}
        return [by_id[i] for i in wanted if i in by_id]

    async def _page(self, table, where, params, order, limit, offset, mapper) -> Page:
        def op(conn: sqlite3.Connection) -> Page:
            total = conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]
            found = conn.execute(
                f"SELECT * FROM {table} WHERE {where} ORDER BY {order} LIMIT ?+0 OFFSET ?", (*params, limit, offset)
            ).fetchall()
            return Page([mapper(r) for r in found], total, limit, offset)

        return await self._db.read_short(op, site=(table, where))


class Writes:
    """Base of a room's writes: bound to the writer's connection for one unit of work."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _delete(self, table: str, item_id: int) -> bool:
        return self._conn.execute(f"DELETE FROM {table} WHERE id = ?", (item_id,)).rowcount > 0
