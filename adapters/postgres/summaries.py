"""Summaries on PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from adapters.postgres import rows
from adapters.postgres.episodes import expire
from adapters.postgres.reads import Reads, Writes
from domain.errors import NotFound
from domain.models import NewSummary, Summary, SummaryChanges, merged, utc_now

_CHANGEABLE = ("content", "first_episode_id", "last_episode_id", "episode_count", "token_count")
_COLUMNS = rows.columns("summaries")


class PostgresSummaries(Reads):
    async def get(self, summary_id: int) -> Summary | None:
        return await self._one(f"SELECT {_COLUMNS} FROM summaries WHERE id = %s AND {rows.live()}",
                               (summary_id, utc_now()), rows.summary_of)

    async def get_many(self, summary_ids: Sequence[int]) -> list[Summary]:
        return await self._many_by_id("summaries", summary_ids, rows.summary_of, live=True)

    async def list(self, session_id: int) -> list[Summary]:
        return await self._all(
            f"SELECT {_COLUMNS} FROM summaries WHERE session_id = %s AND {rows.live()} ORDER BY created_at, id",
            (session_id, utc_now()), rows.summary_of)


class SummaryTx(Writes):
    __slots__ = ()

    def insert(self, summary: NewSummary) -> Summary:
        s, conn = summary, self._conn
        expires = s.expires_at
        owner = conn.execute("SELECT user_id, agent_id FROM sessions WHERE id = %s", (s.session_id,)).fetchone()
        if owner is None:
            raise NotFound(f"session {s.session_id} does not exist", field="sessionId")
        now = utc_now()
        value, meta = rows.stored_metadata(s.metadata)
        new_id = conn.execute(
            "INSERT INTO summaries(session_id, content, first_episode_id, last_episode_id, episode_count,"
            " token_count, metadata, created_at, user_id, agent_id, expires_at)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
            (s.session_id, s.content, s.first_episode_id, s.last_episode_id, s.episode_count,
             s.token_count, value, now, owner[0], owner[1], expires)).fetchone()[0]
        return Summary(new_id, s.session_id, s.content, s.first_episode_id, s.last_episode_id,
                       s.episode_count, s.token_count, meta, now, owner[0], owner[1], expires)

    def get(self, summary_id: int) -> Summary | None:
        row = self._conn.execute(f"SELECT {_COLUMNS} FROM summaries WHERE id = %s", (summary_id,)).fetchone()
        return rows.summary_of(row) if row else None

    def update(self, summary_id: int, changes: SummaryChanges) -> tuple[Summary, Summary] | None:
        old = self.get(summary_id)
        if old is None:
            return None
        new = merged(changes, old)
        values = {name: new[name] for name in _CHANGEABLE}
        value, meta = rows.stored_metadata(new["metadata"])
        self._conn.execute(
            f"UPDATE summaries SET {', '.join(f'{n} = %s' for n in _CHANGEABLE)}, metadata = %s WHERE id = %s",
            (*values.values(), value, summary_id))
        return old, replace(old, **values, metadata=meta)

    def delete(self, summary_id: int) -> bool:
        return self._delete("summaries", summary_id)

    def delete_expired(self, now: str, limit: int) -> list[int]:
        return expire(self._conn, "summaries", now, limit)
