"""``SqliteApiKeys``: API key records in the ``api_keys`` table of the store's database."""

from __future__ import annotations

from dataclasses import replace

from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.driver import sqlite3
from domain.access import ApiKey
from domain.errors import Conflict

_COLUMNS = ("id, name, key_hash, scopes, user_id, agent_id, expires_at, rate_limit, global_read, created_at, "
            "last_used_at, revoked_at")


def _key_of(row) -> ApiKey:
    return ApiKey(row[0], row[1], row[2], tuple(row[3].split(",")), row[4], row[5], row[6], row[7], bool(row[8]),
                  row[9], row[10], row[11])


class SqliteApiKeys:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def _read(self, sql: str, params: tuple) -> list[ApiKey]:
        return await self._db.read(lambda conn: [_key_of(r) for r in conn.execute(sql, params).fetchall()])

    async def create(self, key: ApiKey) -> ApiKey:
        def op(conn: sqlite3.Connection) -> int:
            try:
                cur = conn.execute(
                    "INSERT INTO api_keys(name, key_hash, scopes, user_id, agent_id, expires_at, rate_limit,"
                    " global_read, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                    (key.name, key.key_hash, ",".join(key.scopes), key.user_id, key.agent_id, key.expires_at,
                     key.rate_limit, int(key.global_read), key.created_at))
            except sqlite3.IntegrityError:
                raise Conflict("a key with this hash exists", field="key") from None
            return cur.lastrowid

        return replace(key, id=await self._db.write(op))

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        found = await self._read(f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,))
        return found[0] if found else None

    async def get(self, key_id: int) -> ApiKey | None:
        found = await self._read(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        return found[0] if found else None

    async def list(self) -> list[ApiKey]:
        return await self._read(f"SELECT {_COLUMNS} FROM api_keys ORDER BY id", ())

    async def revoke(self, key_id: int, at: str) -> ApiKey | None:
        await self._db.write(lambda conn: conn.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (at, key_id)))
        return await self.get(key_id)

    async def touch(self, key_id: int, at: str) -> None:
        await self._db.write(lambda conn: conn.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?",
                                                       (at, key_id)))

    async def count_active(self) -> int:
        return await self._db.read(
            lambda conn: conn.execute("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL").fetchone()[0])
