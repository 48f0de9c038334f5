"""Record history (``record_history``) and the change feed (``change_events``) on PostgreSQL.

A unit that appends change events also sends ``NOTIFY`` on ``CHANGES_CHANNEL`` (delivered at its
commit, once per transaction), so every replica's feed wakes when any replica writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psycopg

from adapters.postgres.database import CHANGES_CHANNEL, lock_key
from adapters.postgres.reads import Reads, Writes
from adapters.postgres.rows import jsonb
from domain.changes import Event, EventOp, HistoryOp, Version

TRIM_EVERY = 256  # the feed is trimmed to its retention once per this many appends


def version_of(row) -> Version:
    return Version(row["version"], row["kind"], row["record_id"], row["op"], row["at"], row["actor"],
                   row["before"], row["after"], row["changed"], row["session_id"], row["user_id"])


def event_of(row) -> Event:
    return Event(row["seq"], row["kind"], row["record_id"], row["op"], row["at"], row["session_id"], row["user_id"])


class PostgresHistory(Reads):
    async def of_record(self, kind: str, record_id: int, after: int, limit: int) -> list[Version]:
        return await self._all(
            "SELECT * FROM record_history WHERE kind = %s AND record_id = %s AND version > %s ORDER BY version LIMIT %s",
            (kind, record_id, after, limit), version_of)


class HistoryTx(Writes):
    __slots__ = ()

    def append(self, kind: str, record_id: int, op: HistoryOp, at: str, actor: str | None,
               before: dict | None, after: dict | None, changed: Sequence[str],
               session_id: int | None, user_id: str | None) -> int:
        return self._conn.execute(
            "INSERT INTO record_history(kind, record_id, op, at, actor, before, after, changed, session_id, user_id)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING version",
            (kind, record_id, op, at, actor, None if before is None else jsonb(before),
             None if after is None else jsonb(after), jsonb(list(changed)), session_id, user_id)).fetchone()[0]

    def forget_records(self, kind: str, record_ids: Sequence[int]) -> int:
        ids = list(record_ids)
        if not ids:
            return 0
        return self._conn.execute("DELETE FROM record_history WHERE kind = %s AND record_id = ANY(%s)",
                                  (kind, ids)).rowcount

    def forget_session(self, session_id: int) -> int:
        return self._conn.execute("DELETE FROM record_history WHERE session_id = %s", (session_id,)).rowcount

    def forget_user(self, user_id: str) -> int:
        return self._conn.execute("DELETE FROM record_history WHERE user_id = %s", (user_id,)).rowcount


class PostgresEvents(Reads):
    async def after(self, seq: int, limit: int) -> list[Event]:
        return await self._all("SELECT * FROM change_events WHERE seq > %s ORDER BY seq LIMIT %s", (seq, limit),
                               event_of)

    def on_change(self, wake: Callable[[], None]) -> None:
        self._db.listen(CHANGES_CHANNEL, wake)  # every replica's units NOTIFY (EventTx.append)

    async def bounds(self) -> tuple[int, int]:
        def op(conn: psycopg.Connection) -> tuple[int, int]:
            low, high = conn.execute("SELECT min(seq), max(seq) FROM change_events").fetchone()
            return (low or 0, high or 0)

        return await self._db.read(op)


class EventTx(Writes):
    __slots__ = ("_keep", "_notified")

    def __init__(self, conn: psycopg.Connection, keep: int) -> None:
        super().__init__(conn)
        self._keep = keep
        self._notified = False

    def append(self, kind: str, record_id: int, op: EventOp, at: str, session_id: int | None,
               user_id: str | None) -> int:
        # Sequence numbers come from an identity column: never reused, also after a trim. Units of
        # different replicas could commit out of seq order, and a reader past the higher seq would
        # never see the lower one: a transaction lock held to COMMIT keeps seq order commit order.
        if not self._notified:
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("change_events"),))
            self._conn.execute(f"NOTIFY {CHANGES_CHANNEL}")
            self._notified = True
        seq = self._conn.execute(
            "INSERT INTO change_events(kind, record_id, op, at, session_id, user_id) VALUES (%s,%s,%s,%s,%s,%s)"
            " RETURNING seq", (kind, record_id, op, at, session_id, user_id)).fetchone()[0]
        if seq % TRIM_EVERY == 0:
            self.trim(self._keep)
        return seq

    def trim(self, keep: int) -> int:
        row = self._conn.execute("SELECT max(seq) FROM change_events").fetchone()
        if row[0] is None:
            return 0
        return self._conn.execute("DELETE FROM change_events WHERE seq <= %s", (row[0] - keep,)).rowcount
