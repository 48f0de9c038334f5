"""Sessions on SQLite."""

from __future__ import annotations

from adapters.sqlite import rows
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.reads import Reads, Writes
from domain.errors import Conflict
from domain.models import Metadata, Owner, Page, Session, utc_now


class SqliteSessions(Reads):
    async def get(self, session_id: int) -> Session | None:
        return await self._one("SELECT * FROM sessions WHERE id = ?", (session_id,), rows.session_of)

    async def by_external_id(self, external_id: str) -> Session | None:
        return await self._one("SELECT * FROM sessions WHERE external_id = ?", (external_id,), rows.session_of)

    async def list(self, limit: int, offset: int, owner: Owner = Owner()) -> Page[Session]:
        where, params = owner_sql(owner)
        return await self._page("sessions", where, params, "id", limit, offset, rows.session_of)


class SessionTx(Writes):
    __slots__ = ()

    def create(self, external_id: str, metadata: Metadata, owner: Owner = Owner()) -> Session:
        now = utc_now()
        text, meta = rows.stored_metadata(metadata)
        try:
            cur = self._conn.execute(
                "INSERT INTO sessions(external_id, metadata, created_at, updated_at, user_id, agent_id)"
                " VALUES (?,?,?,?,?,?)",
                (external_id, text, now, now, owner.user_id, owner.agent_id),
            )
        except sqlite3.IntegrityError:
            raise Conflict(f"a session with externalId {external_id!r} exists", field="externalId")
        return Session(cur.lastrowid, external_id, meta, now, now, owner.user_id, owner.agent_id)

    def update(self, session_id: int, metadata: Metadata) -> Session | None:
        self._conn.execute(
            "UPDATE sessions SET metadata = ?, updated_at = ? WHERE id = ?",
            (rows.dump_metadata(metadata), utc_now(), session_id),
        )
        row = self._conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return rows.session_of(row) if row else None

    def delete_owned(self, user_id: str) -> tuple[list[int], int, int]:
        conn = self._conn
        ids = [r[0] for r in conn.execute("SELECT id FROM sessions WHERE user_id = ? ORDER BY id", (user_id,))]
        if not ids:
            return [], 0, 0
        # episodes and summaries carry their session's user_id: counted by the same index
        episodes = conn.execute("SELECT count(*) FROM episodes WHERE user_id = ?", (user_id,)).fetchone()[0]
        summaries = conn.execute("SELECT count(*) FROM summaries WHERE user_id = ?", (user_id,)).fetchone()[0]
        conn.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,))  # the rest by ON DELETE CASCADE
        return ids, episodes, summaries

    def delete(self, session_id: int) -> bool:
        return self._delete("sessions", session_id)  # episodes and summaries go by ON DELETE CASCADE


def owner_sql(owner: Owner, alias: str = "") -> tuple[str, tuple]:
    """The condition "owned by ``owner``" on a table with ``user_id`` / ``agent_id`` columns."""
    where, params = ["1"], []
    if owner.user_id is not None:
        where.append(f"{alias}user_id = ?")
        params.append(owner.user_id)
    if owner.agent_id is not None:
        where.append(f"{alias}agent_id = ?")
        params.append(owner.agent_id)
    return " AND ".join(where[1:] or where), tuple(params)
