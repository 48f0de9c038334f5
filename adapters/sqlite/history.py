"""Record history (table ``record_history``) and the change feed (table ``change_events``) on SQLite."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from adapters.sqlite.driver import sqlite3
from adapters.sqlite.reads import Reads, Writes, in_list
from domain.changes import Event, EventOp, HistoryOp, Version

TRIM_EVERY = 256  # the feed is trimmed to its retention once per this many appends


def _json(value) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def version_of(row: sqlite3.Row) -> Version:
    return Version(row["version"], row["kind"], row["record_id"], row["op"], row["at"], row["actor"],
                   json.loads(row["before"]) if row["before"] else None,
                   json.loads(row["after"]) if row["after"] else None, json.loads(row["changed"]),
                   row["session_id"], row["user_id"])


def event_of(row: sqlite3.Row) -> Event:
    return Event(row["seq"], row["kind"], row["record_id"], row["op"], row["at"], row["session_id"], row["user_id"])


class SqliteHistory(Reads):
    async def of_record(self, kind: str, record_id: int, after: int, limit: int) -> list[Version]:
        return await self._all(
            "SELECT * FROM record_history WHERE kind = ? AND record_id = ? AND version > ? ORDER BY version LIMIT ?+0",
            (kind, record_id, after, limit), version_of,
        )


class HistoryTx(Writes):
    __slots__ = ()

    def append(self, kind: str, record_id: int, op: HistoryOp, at: str, actor: str | None,
               before: dict | None, after: dict | None, changed: Sequence[str],
               session_id: int | None, user_id: str | None) -> int:
        return self._conn.execute(
            "INSERT INTO record_history(kind, record_id, op, at, actor, before, after, changed, session_id, user_id)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            (kind, record_id, op, at, actor, _json(before), _json(after), _json(list(changed)), session_id, user_id),
        ).lastrowid

    def forget_records(self, kind: str, record_ids: Sequence[int]) -> int:
        ids = list(record_ids)
        if not ids:
            return 0
        return self._conn.execute(
            f"DELETE FROM record_history WHERE kind = ? AND record_id IN ({in_list(ids)})", (kind, *ids)).rowcount

    def forget_session(self, session_id: int) -> int:
        return self._conn.execute("DELETE FROM record_history WHERE session_id = ?", (session_id,)).rowcount

    def forget_user(self, user_id: str) -> int:
        return self._conn.execute("DELETE FROM record_history WHERE user_id = ?", (user_id,)).rowcount


class SqliteEvents(Reads):
    async def after(self, seq: int, limit: int) -> list[Event]:
        events = await self._all("SELECT * FROM change_events WHERE seq > ? ORDER BY seq LIMIT ?+0", (seq, limit),
                                 event_of)
        if events:
            # A consumer keeps the last seq as its cursor: what it is served must not be lost in a
            # power cut and its numbers handed out again, so it is made durable first (connection.py).
            await self._db.read(lambda _conn: self._db.make_durable())
        return events

    def on_change(self, wake: Callable[[], None]) -> None:
        # SQLite tells no one of another process's commit: the feed's readers look again instead.
        return None

    async def bounds(self) -> tuple[int, int]:
        def op(conn: sqlite3.Connection) -> tuple[int, int]:
            low, high = conn.execute("SELECT min(seq), max(seq) FROM change_events").fetchone()
            return (low or 0, high or 0)

        return await self._db.read(op)


class EventTx(Writes):
    __slots__ = ("_keep",)

    def __init__(self, conn: sqlite3.Connection, keep: int) -> None:
        super().__init__(conn)
        self._keep = keep

    def append(self, kind: str, record_id: int, op: EventOp, at: str, session_id: int | None,
               user_id: str | None) -> int:
        seq = self._conn.execute(
            "INSERT INTO change_events(kind, record_id, op, at, session_id, user_id) VALUES (?,?,?,?,?,?)",
            (kind, record_id, op, at, session_id, user_id),
        ).lastrowid
        if seq % TRIM_EVERY == 0:
            self.trim(self._keep)
        return seq

    def trim(self, keep: int) -> int:
        row = self._conn.execute("SELECT max(seq) FROM change_events").fetchone()
        if row[0] is None:
            return 0
        return self._conn.execute("DELETE FROM change_events WHERE seq <= ?", (row[0] - keep,)).rowcount
