"""The embedding outbox on SQLite (table ``embedding_outbox``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from adapters.sqlite import rows
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.reads import Reads, Writes, in_list
from domain.models import format_timestamp, utc_now
from domain.outbox import CLAIM_LEASE, Backlog, JobOp, OutboxJob, OutboxScope, ScopePending
from domain.record_kinds import KINDS, Source

# A record's job waits while another of its jobs is claimed or backing off: a drainer still
# embedding its older text would otherwise upsert that vector after a newer job's.
_RECORD_FREE = ("(o.op = 'delete_session' OR NOT EXISTS (SELECT 1 FROM embedding_outbox b"
                " WHERE b.collection = o.collection AND b.ref_id = o.ref_id AND b.op <> 'delete_session'"
                " AND b.dead_at IS NULL AND b.next_attempt_at > ?))")
_INSERT = ("INSERT INTO embedding_outbox(collection, op, ref_id, next_attempt_at, created_at)"
           " VALUES (?, ?, ?, ?, ?)")
# Two parameters a job: well below the 32,766 a statement of SQLite's default build.
_HELD_PER_STATEMENT = 5_000


def _held(jobs: Sequence[OutboxJob]) -> Iterator[tuple[str, list]]:
    """The condition matching the rows of ``jobs`` whose retry time is still the one the caller
    read (the claims it still holds), with its parameters: one pair per statement's worth of jobs."""
    pairs = list(dict.fromkeys((job.id, job.next_attempt_at) for job in jobs))
    for start in range(0, len(pairs), _HELD_PER_STATEMENT):
        chunk = pairs[start:start + _HELD_PER_STATEMENT]
        yield (f"(id, next_attempt_at) IN (VALUES {', '.join(['(?, ?)'] * len(chunk))})",
               [value for pair in chunk for value in pair])


class SqliteOutbox(Reads):
    async def due(self, limit: int, now: datetime) -> list[OutboxJob]:
        return await self._all(
            "SELECT * FROM embedding_outbox WHERE next_attempt_at <= ? AND dead_at IS NULL ORDER BY id LIMIT ?+0",
            (format_timestamp(now), limit), rows.job_of,
        )

    async def claim(self, limit: int, now: datetime, only: Sequence[int] | None = None) -> list[OutboxJob]:
        # One write: processes sharing the file take turns at the writer's lock, so none claims a
        # job another has just claimed, nor a record whose job another has in flight.
        stamp = format_timestamp(now)
        named = list(only or [])
        if only is not None and not named:
            return []
        among = f" AND o.id IN ({in_list(named)})" if only is not None else ""

        def op(conn: sqlite3.Connection) -> list[OutboxJob]:
            found = conn.execute(
                "UPDATE embedding_outbox SET next_attempt_at = ? WHERE id IN (SELECT o.id FROM embedding_outbox o"
                f" WHERE o.next_attempt_at <= ? AND o.dead_at IS NULL AND {_RECORD_FREE}{among} ORDER BY o.id LIMIT ?+0)"
                " RETURNING *", (format_timestamp(now + CLAIM_LEASE), stamp, stamp, *named, limit)).fetchall()
            return sorted((rows.job_of(r) for r in found), key=lambda job: job.id)

        return await self._db.write(op)

    async def release(self, jobs: Sequence[OutboxJob], now: datetime) -> int:
        return await self._give_back(jobs, "next_attempt_at = ?", [format_timestamp(now)], live_only=True)

    async def defer(self, jobs: Sequence[OutboxJob], error: str, retry_at: datetime) -> int:
        return await self._give_back(jobs, "attempts = attempts + 1, last_error = ?, next_attempt_at = ?",
                                     [error[:500], format_timestamp(retry_at)])

    async def bury(self, jobs: Sequence[OutboxJob], error: str) -> int:
        return await self._give_back(jobs, "attempts = attempts + 1, last_error = ?, dead_at = ?",
                                     [error[:500], utc_now()])

    async def _give_back(self, jobs: Sequence[OutboxJob], assignments: str, values: list,
                         live_only: bool = False) -> int:
        """Update the rows of the claims the caller still holds, in one transaction; how many."""
        if not jobs:
            return 0
        live = "dead_at IS NULL AND " if live_only else ""
        return await self._db.write(lambda conn: sum(
            conn.execute(f"UPDATE embedding_outbox SET {assignments} WHERE {live}{held}", [*values, *params]).rowcount
            for held, params in _held(jobs)))

    async def dead(self, limit: int) -> list[OutboxJob]:
        return await self._all(
            "SELECT * FROM embedding_outbox WHERE dead_at IS NOT NULL ORDER BY id LIMIT ?+0", (limit,), rows.job_of,
        )

    async def retry_dead(self, job_ids: Sequence[int] | None = None) -> int:
        ids = list(job_ids or [])
        if job_ids is not None and not ids:
            return 0
        where = f" AND id IN ({in_list(ids)})" if job_ids is not None else ""
        return await self._db.write(lambda conn: conn.execute(
            "UPDATE embedding_outbox SET attempts = 0, dead_at = NULL, next_attempt_at = ?"
            f" WHERE dead_at IS NOT NULL{where}", [utc_now(), *ids],
        ).rowcount)

    async def backlog(self) -> Backlog:
        def op(conn: sqlite3.Connection) -> Backlog:
            pending, oldest, failing, dead = conn.execute(
                "SELECT count(*) FILTER (WHERE dead_at IS NULL), min(created_at) FILTER (WHERE dead_at IS NULL),"
                " count(*) FILTER (WHERE dead_at IS NULL AND attempts > 0), count(*) FILTER (WHERE dead_at IS NOT NULL)"
                " FROM embedding_outbox"
            ).fetchone()
            last = conn.execute(
                "SELECT last_error FROM embedding_outbox WHERE last_error IS NOT NULL ORDER BY id DESC LIMIT 1"
            ).fetchone()
            return Backlog(pending, oldest, last[0] if last else None, failing or 0, dead or 0)

        return await self._db.read(op)

    async def pending_in_scope(self, collection: Source, scope: OutboxScope, limit: int) -> ScopePending:
        kind = KINDS[collection]
        where, params = ["o.collection = ?", "o.op = 'upsert'", "o.dead_at IS NULL"], [collection]
        if scope.session_id is not None and kind.in_sessions:
            where.append("r.session_id = ?")
            params.append(scope.session_id)
        if scope.user_id is not None:
            where.append("r.user_id = ?")
            params.append(scope.user_id)
        if scope.agent_id is not None and kind.in_sessions:
            where.append("r.agent_id = ?")
            params.append(scope.agent_id)
        # The record's own table bounds the scope: a job whose record is gone is not pending here.
        body = f" FROM embedding_outbox o JOIN {kind.name} r ON r.id = o.ref_id WHERE {' AND '.join(where)}"

        def op(conn: sqlite3.Connection) -> ScopePending:
            total = conn.execute("SELECT count(*)" + body, params).fetchone()[0]
            if not total or limit <= 0:
                return ScopePending([], total)
            found = conn.execute("SELECT o.*" + body + " ORDER BY o.id LIMIT ?+0", [*params, limit]).fetchall()
            return ScopePending([rows.job_of(r) for r in found], total)

        return await self._db.read(op)


class OutboxTx(Writes):
    __slots__ = ()

    def enqueue(self, collection: Source, op: JobOp, ref_ids: Sequence[int]) -> None:
        now = utc_now()
        rows_ = [(collection, op, ref_id, now, now) for ref_id in ref_ids]
        if len(rows_) == 1:  # the common case (one record per request): execute costs less than executemany
            self._conn.execute(_INSERT, rows_[0])
        elif rows_:
            self._conn.executemany(_INSERT, rows_)

    def complete(self, jobs: Sequence[OutboxJob]) -> list[int]:
        removed: list[int] = []
        for held, params in _held(jobs):
            removed += [row[0] for row in self._conn.execute(
                f"DELETE FROM embedding_outbox WHERE {held} RETURNING id", params).fetchall()]
        return removed

    def enqueue_every(self, collection: Source) -> int:
        now = utc_now()
        table = KINDS[collection].name  # each kind's rows live in the table of its name
        return self._conn.execute(
            "INSERT INTO embedding_outbox(collection, op, ref_id, next_attempt_at, created_at)"
            f" SELECT ?, 'upsert', id, ?, ? FROM {table} ORDER BY id",
            (collection, now, now),
        ).rowcount
