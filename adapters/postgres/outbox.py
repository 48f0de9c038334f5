"""The embedding outbox on PostgreSQL (table ``embedding_outbox``).

Every replica's worker drains the same table: ``claim`` takes the jobs it returns by pushing their
retry time a lease ahead in the statement that reads them, skipping rows another replica is
claiming (``FOR UPDATE SKIP LOCKED``), so two replicas never take the same job, and a replica
killed mid-job leaves it due again when the lease ends. It also leaves a record's later jobs
while one of its jobs is in flight, so one record is never embedded by two replicas at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import psycopg

from adapters.postgres import rows
from adapters.postgres.database import lock_key
from adapters.postgres.reads import Reads, Writes
from domain.models import format_timestamp, utc_now
from domain.outbox import CLAIM_LEASE, Backlog, JobOp, OutboxJob, OutboxScope, ScopePending
from domain.record_kinds import KINDS, Source

# A record's job waits while another of its jobs is claimed or backing off: a drainer still
# embedding its older text would otherwise upsert that vector after a newer job's.
_RECORD_FREE = ("(o.op = 'delete_session' OR NOT EXISTS (SELECT 1 FROM embedding_outbox b"
                " WHERE b.collection = o.collection AND b.ref_id = o.ref_id AND b.op <> 'delete_session'"
                " AND b.dead_at IS NULL AND b.next_attempt_at > %s))")
_INSERT = ("INSERT INTO embedding_outbox(collection, op, ref_id, next_attempt_at, created_at)"
           " VALUES (%s, %s, %s, %s, %s)")
# The rows of the claims a caller still holds: its jobs' ids, each with the retry time it read.
_HELD = ("unnest(%s::bigint[], %s::text[]) AS held(id, stamp)",
         "o.id = held.id AND o.next_attempt_at = held.stamp")


def _held(jobs: Sequence[OutboxJob]) -> tuple[list[int], list[str]]:
    pairs = list(dict.fromkeys((job.id, job.next_attempt_at) for job in jobs))
    return [job_id for job_id, _ in pairs], [stamp for _, stamp in pairs]


class PostgresOutbox(Reads):
    async def due(self, limit: int, now: datetime) -> list[OutboxJob]:
        return await self._all(
            "SELECT * FROM embedding_outbox WHERE next_attempt_at <= %s AND dead_at IS NULL ORDER BY id LIMIT %s",
            (format_timestamp(now), limit), rows.job_of)

    async def claim(self, limit: int, now: datetime, only: Sequence[int] | None = None) -> list[OutboxJob]:
        stamp = format_timestamp(now)
        if only is not None and not only:
            return []
        among, named = (" AND o.id = ANY(%s)", [list(only)]) if only is not None else ("", [])

        def op(conn: psycopg.Connection) -> list[OutboxJob]:
            # Claims take turns (a transaction lock, held to COMMIT), so each one sees every
            # earlier claim committed and never takes a record another replica has in flight.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("outbox_claim"),))
            found = conn.execute(
                "WITH claimed AS (SELECT o.id FROM embedding_outbox o WHERE o.next_attempt_at <= %s"
                f" AND o.dead_at IS NULL AND {_RECORD_FREE}{among} ORDER BY o.id LIMIT %s FOR UPDATE SKIP LOCKED)"
                " UPDATE embedding_outbox o SET next_attempt_at = %s FROM claimed WHERE o.id = claimed.id"
                " RETURNING o.*", (stamp, stamp, *named, limit, format_timestamp(now + CLAIM_LEASE))).fetchall()
            return sorted((rows.job_of(r) for r in found), key=lambda job: job.id)

        return await self._db.write(op)

    async def release(self, jobs: Sequence[OutboxJob], now: datetime) -> int:
        return await self._give_back(jobs, "next_attempt_at = %s", [format_timestamp(now)], live_only=True)

    async def defer(self, jobs: Sequence[OutboxJob], error: str, retry_at: datetime) -> int:
        return await self._give_back(jobs, "attempts = o.attempts + 1, last_error = %s, next_attempt_at = %s",
                                     [error[:500], format_timestamp(retry_at)])

    async def bury(self, jobs: Sequence[OutboxJob], error: str) -> int:
        return await self._give_back(jobs, "attempts = o.attempts + 1, last_error = %s, dead_at = %s",
                                     [error[:500], utc_now()])

    async def _give_back(self, jobs: Sequence[OutboxJob], assignments: str, values: list,
                         live_only: bool = False) -> int:
        """Update the rows of the claims the caller still holds; how many."""
        if not jobs:
            return 0
        live = " AND o.dead_at IS NULL" if live_only else ""
        return await self._db.write(lambda conn: conn.execute(
            f"UPDATE embedding_outbox o SET {assignments} FROM {_HELD[0]} WHERE {_HELD[1]}{live}",
            [*values, *_held(jobs)]).rowcount)

    async def dead(self, limit: int) -> list[OutboxJob]:
        return await self._all("SELECT * FROM embedding_outbox WHERE dead_at IS NOT NULL ORDER BY id LIMIT %s",
                               (limit,), rows.job_of)

    async def retry_dead(self, job_ids: Sequence[int] | None = None) -> int:
        ids = list(job_ids or [])
        if job_ids is not None and not ids:
            return 0
        where, params = (" AND id = ANY(%s)", [ids]) if job_ids is not None else ("", [])
        return await self._db.write(lambda conn: conn.execute(
            "UPDATE embedding_outbox SET attempts = 0, dead_at = NULL, next_attempt_at = %s"
            f" WHERE dead_at IS NOT NULL{where}", [utc_now(), *params]).rowcount)

    async def backlog(self) -> Backlog:
        def op(conn: psycopg.Connection) -> Backlog:
            pending, oldest, failing, dead = conn.execute(
                "SELECT count(*) FILTER (WHERE dead_at IS NULL), min(created_at) FILTER (WHERE dead_at IS NULL),"
                " count(*) FILTER (WHERE dead_at IS NULL AND attempts > 0), count(*) FILTER (WHERE dead_at IS NOT NULL)"
                " FROM embedding_outbox").fetchone()
            last = conn.execute("SELECT last_error FROM embedding_outbox WHERE last_error IS NOT NULL"
                                " ORDER BY id DESC LIMIT 1").fetchone()
            return Backlog(pending, oldest, last[0] if last else None, failing or 0, dead or 0)

        return await self._db.read(op)

    async def pending_in_scope(self, collection: Source, scope: OutboxScope, limit: int) -> ScopePending:
        kind = KINDS[collection]
        where, params = ["o.collection = %s", "o.op = 'upsert'", "o.dead_at IS NULL"], [collection]
        if scope.session_id is not None and kind.in_sessions:
            where.append("r.session_id = %s")
            params.append(scope.session_id)
        if scope.user_id is not None:
            where.append("r.user_id = %s")
            params.append(scope.user_id)
        if scope.agent_id is not None and kind.in_sessions:
            where.append("r.agent_id = %s")
            params.append(scope.agent_id)
        # The record's own table bounds the scope: a job whose record is gone is not pending here.
        body = f" FROM embedding_outbox o JOIN {kind.name} r ON r.id = o.ref_id WHERE {' AND '.join(where)}"

        def op(conn: psycopg.Connection) -> ScopePending:
            total = conn.execute("SELECT count(*)" + body, params).fetchone()[0]
            if not total or limit <= 0:
                return ScopePending([], total)
            found = conn.execute("SELECT o.*" + body + " ORDER BY o.id LIMIT %s", [*params, limit]).fetchall()
            return ScopePending([rows.job_of(r) for r in found], total)

        return await self._db.read(op)


class OutboxTx(Writes):
    __slots__ = ()

    def enqueue(self, collection: Source, op: JobOp, ref_ids: Sequence[int]) -> None:
        now = utc_now()
        found = [(collection, op, ref_id, now, now) for ref_id in ref_ids]
        if len(found) == 1:
            self._conn.execute(_INSERT, found[0])
        elif found:
            with self._conn.cursor() as cur:
                cur.executemany(_INSERT, found)

    def complete(self, jobs: Sequence[OutboxJob]) -> list[int]:
        if not jobs:
            return []
        return [row["id"] for row in self._conn.execute(
            f"DELETE FROM embedding_outbox o USING {_HELD[0]} WHERE {_HELD[1]} RETURNING o.id", _held(jobs)).fetchall()]

    def enqueue_every(self, collection: Source) -> int:
        now = utc_now()
        table = KINDS[collection].name  # each kind's rows live in the table of its name
        return self._conn.execute(
            "INSERT INTO embedding_outbox(collection, op, ref_id, next_attempt_at, created_at)"
            f" SELECT %s, 'upsert', id, %s, %s FROM {table} ORDER BY id", (collection, now, now)).rowcount
