"""Sessions on PostgreSQL."""

from __future__ import annotations

import psycopg

from adapters.postgres import rows
from adapters.postgres.reads import Reads, Writes
from domain.errors import Conflict
from domain.models import Metadata, Owner, Page, Session, utc_now


class PostgresSessions(Reads):
    async def get(self, session_id: int) -> Session | None:
        return await self._one("SELECT * FROM sessions WHERE id = %s", (session_id,), rows.session_of)

    async def by_external_id(self, external_id: str) -> Session | None:
        return await self._one("SELECT * FROM sessions WHERE external_id = %s", (external_id,), rows.session_of)

    async def list(self, limit: int, offset: int, owner: Owner = Owner()) -> Page[Session]:
        where, params = owner_sql(owner)
        return await self._page("sessions", where, params, "id", limit, offset, rows.session_of)


class SessionTx(Writes):
    __slots__ = ()

    def create(self, external_id: str, metadata: Metadata, owner: Owner = Owner()) -> Session:
        now = utc_now()
        value, meta = rows.stored_metadata(metadata)
        try:
            with self._conn.transaction():  # a savepoint: the unit goes on if the caller handles the conflict
                new_id = self._conn.execute(
                    "INSERT INTO sessions(external_id, metadata, created_at, updated_at, user_id, agent_id)"
                    " VALUES (%s,%s,%s,%s,%s,%s) RETURNING id",
                    (external_id, value, now, now, owner.user_id, owner.agent_id)).fetchone()[0]
        except psycopg.errors.UniqueViolation:
            raise Conflict(f"a session with externalId {external_id!r} exists", field="externalId") from None
        return Session(new_id, external_id, meta, now, now, owner.user_id, owner.agent_id)

    def update(self, session_id: int, metadata: Metadata) -> Session | None:
        row = self._conn.execute("UPDATE sessions SET metadata = %s, updated_at = %s WHERE id = %s RETURNING *",
                                 (rows.jsonb(metadata or {}), utc_now(), session_id)).fetchone()
        return rows.session_of(row) if row else None

    def delete_owned(self, user_id: str) -> tuple[list[int], int, int]:
        conn = self._conn
        ids = [r[0] for r in conn.execute("SELECT id FROM sessions WHERE user_id = %s ORDER BY id", (user_id,))]
        if not ids:
            return [], 0, 0
        # episodes and summaries carry their session's user_id: counted by the same index
        episodes = conn.execute("SELECT count(*) FROM episodes WHERE user_id = %s", (user_id,)).fetchone()[0]
        summaries = conn.execute("SELECT count(*) FROM summaries WHERE user_id = %s", (user_id,)).fetchone()[0]
        conn.execute("DELETE FROM sessions WHERE user_id = %s", (user_id,))  # the rest by ON DELETE CASCADE
        return ids, episodes, summaries

    def delete(self, session_id: int) -> bool:
        return self._delete("sessions", session_id)  # episodes and summaries go by ON DELETE CASCADE


def owner_sql(owner: Owner, alias: str = "") -> tuple[str, tuple]:
    """The condition "owned by ``owner``" on a table with ``user_id`` / ``agent_id`` columns."""
    where, params = [], []
    if owner.user_id is not None:
        where.append(f"{alias}user_id = %s")
        params.append(owner.user_id)
    if owner.agent_id is not None:
        where.append(f"{alias}agent_id = %s")
        params.append(owner.agent_id)
    return " AND ".join(where) or "TRUE", tuple(params)
