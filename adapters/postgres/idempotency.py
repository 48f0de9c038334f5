"""Stored answers of keyed writes on PostgreSQL (table ``idempotency_keys``)."""

from __future__ import annotations

from adapters.postgres.reads import Reads, Writes
from domain.idempotency import KeyedAnswer

_GET = "SELECT * FROM idempotency_keys WHERE caller = %s AND key = %s AND expires_at > %s"


def answer_of(row) -> KeyedAnswer:
    return KeyedAnswer(row["caller"], row["key"], row["fingerprint"], row["status"], bytes(row["body"]),
                       row["created_at"], row["expires_at"])


class PostgresIdempotency(Reads):
    async def get(self, caller: str, key: str, now: str) -> KeyedAnswer | None:
        return await self._one(_GET, (caller, key, now), answer_of)


class IdempotencyTx(Writes):
    __slots__ = ()

    def get(self, caller: str, key: str, now: str) -> KeyedAnswer | None:
        row = self._conn.execute(_GET, (caller, key, now)).fetchone()
        return answer_of(row) if row else None

    def put(self, answer: KeyedAnswer) -> None:
        # An expired row is replaced in place; a live one is not touched, and that is an error the
        # unit must not commit past (two writes under one key). Two replicas inserting one new key
        # at once: the second waits on the first's row lock, then finds it live and raises.
        written = self._conn.execute(
            "INSERT INTO idempotency_keys(caller, key, fingerprint, status, body, created_at, expires_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (caller, key) DO UPDATE SET"
            " fingerprint = excluded.fingerprint, status = excluded.status, body = excluded.body,"
            " created_at = excluded.created_at, expires_at = excluded.expires_at"
            " WHERE idempotency_keys.expires_at <= excluded.created_at",
            (answer.caller, answer.key, answer.fingerprint, answer.status, answer.body, answer.created_at,
             answer.expires_at),
        ).rowcount
        if written != 1:
            raise KeyError(f"idempotency key {answer.key!r} is already stored")

    def delete_expired(self, now: str, limit: int) -> int:
        return self._conn.execute(
            # SKIP LOCKED: replicas sweeping at once take different rows instead of waiting on each other.
            "DELETE FROM idempotency_keys WHERE (caller, key) IN (SELECT caller, key FROM idempotency_keys"
            " WHERE expires_at <= %s LIMIT %s FOR UPDATE SKIP LOCKED)", (now, limit)).rowcount

