"""``PostgresApiKeys``: API key records in the ``api_keys`` table of the store's database."""

from __future__ import annotations

from dataclasses import replace

import psycopg

from adapters.postgres.database import PostgresDatabase
from domain.access import ApiKey
from domain.errors import Conflict

_COLUMNS = ("id, name, key_hash, scopes, user_id, agent_id, expires_at, rate_limit, global_read, created_at, "
            "last_used_at, revoked_at")


def _key_of(row) -> ApiKey:
    return ApiKey(row[0], row[1], row[2], tuple(row[3].split(",")), row[4], row[5], row[6], row[7], bool(row[8]),
                  row[9], row[10], row[11])


class PostgresApiKeys:
    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    async def _read(self, sql: str, params: tuple) -> list[ApiKey]:
        return await self._db.read(lambda conn: [_key_of(r) for r in conn.execute(sql, params).fetchall()])

    async def create(self, key: ApiKey) -> ApiKey:
        def op(conn: psycopg.Connection) -> int:
            # A savepoint, so the duplicate's error leaves the transaction usable to raise the domain's Conflict.
            try:
                with conn.transaction():
                    return conn.execute(
                        "INSERT INTO api_keys(name, key_hash, scopes, user_id, agent_id, expires_at, rate_limit,"
                        " global_read, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                        (key.name, key.key_hash, ",".join(key.scopes), key.user_id, key.agent_id, key.expires_at,
                         key.rate_limit, key.global_read, key.created_at)).fetchone()[0]
            except psycopg.errors.UniqueViolation:
                raise Conflict("a key with this hash exists", field="key") from None

        return replace(key, id=await self._db.write(op))

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        found = await self._read(f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = %s", (key_hash,))
        return found[0] if found else None

    async def get(self, key_id: int) -> ApiKey | None:
        found = await self._read(f"SELECT {_COLUMNS} FROM api_keys WHERE id = %s", (key_id,))
        return found[0] if found else None

    async def list(self) -> list[ApiKey]:
        return await self._read(f"SELECT {_COLUMNS} FROM api_keys ORDER BY id", ())

    async def revoke(self, key_id: int, at: str) -> ApiKey | None:
        await self._db.write(lambda conn: conn.execute(
            "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL", (at, key_id)))
        return await self.get(key_id)

    async def touch(self, key_id: int, at: str) -> None:
        await self._db.write(lambda conn: conn.execute("UPDATE api_keys SET last_used_at = %s WHERE id = %s",
                                                       (at, key_id)))

    async def count_active(self) -> int:
        return await self._db.read(
            lambda conn: conn.execute("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL").fetchone()[0])
