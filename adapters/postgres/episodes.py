"""Episodes on PostgreSQL (their keyword vector is a generated column, see schema.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import psycopg

from adapters.postgres import rows
from adapters.postgres.reads import Reads, Writes
from domain.errors import NotFound
from domain.models import Episode, EpisodeChanges, Neighbours, NewEpisode, Page, merged, utc_now

_COLUMNS = rows.columns("episodes")

# One statement: two index range scans per episode on (session_id, created_at, id); row values
# compare the (created_at, id) pair the way list() orders it.
_NEIGHBOURS = """
    SELECT t.id, s.side, s.id, s.created_at FROM episodes t
    CROSS JOIN LATERAL (
        (SELECT 0 AS side, b.id, b.created_at FROM episodes b WHERE b.session_id = t.session_id
         AND (b.created_at, b.id) < (t.created_at, t.id) ORDER BY b.created_at DESC, b.id DESC LIMIT %(w)s)
        UNION ALL
        (SELECT 1, a.id, a.created_at FROM episodes a WHERE a.session_id = t.session_id
         AND (a.created_at, a.id) > (t.created_at, t.id) ORDER BY a.created_at, a.id LIMIT %(w)s)
        UNION ALL SELECT -1, NULL, NULL) s
    WHERE t.id = ANY(%(ids)s)"""


class PostgresEpisodes(Reads):
    async def get(self, episode_id: int) -> Episode | None:
        return await self._one(f"SELECT {_COLUMNS} FROM episodes WHERE id = %s AND {rows.live()}",
                               (episode_id, utc_now()), rows.episode_of)

    async def get_many(self, episode_ids: Sequence[int]) -> list[Episode]:
        return await self._many_by_id("episodes", episode_ids, rows.episode_of, live=True)

    async def list(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        return await self._page("episodes", f"session_id = %s AND {rows.live()}", (session_id, utc_now()),
                                "created_at, id", limit, offset, rows.episode_of)

    async def recent(self, session_id: int, limit: int) -> list[Episode]:
        return await self._all(
            f"SELECT {_COLUMNS} FROM episodes WHERE session_id = %s AND {rows.live()}"
            " ORDER BY created_at DESC, id DESC LIMIT %s", (session_id, utc_now(), limit), rows.episode_of)

    async def neighbours(self, episode_ids: Sequence[int], window: int) -> dict[int, Neighbours]:
        wanted = list(dict.fromkeys(episode_ids))
        if not wanted or window <= 0:
            return {}

        def op(conn: psycopg.Connection) -> dict[int, Neighbours]:
            sides: dict[int, tuple[list, list]] = {}
            for target, side, other, created_at in conn.execute(_NEIGHBOURS, {"ids": wanted, "w": window}):
                pair = sides.setdefault(target, ([], []))
                if side >= 0:
                    pair[side].append((created_at, other))
            return {target: Neighbours(before=[i for _, i in sorted(before, reverse=True)],
                                       after=[i for _, i in sorted(after)])
                    for target, (before, after) in sides.items()}

        return await self._db.read(op)


class EpisodeTx(Writes):
    __slots__ = ()

    def insert(self, episodes: Sequence[NewEpisode]) -> list[Episode]:
        conn = self._conn
        owners: dict[int, tuple] = {}
        stored: list[Episode] = []
        for new in episodes:
            if new.session_id not in owners:
                row = conn.execute("SELECT user_id, agent_id FROM sessions WHERE id = %s",
                                   (new.session_id,)).fetchone()
                if row is None:
                    raise NotFound(f"session {new.session_id} does not exist", field="sessionId")
                owners[new.session_id] = (row[0], row[1])
            user, agent = owners[new.session_id]
            created, expires = new.created_at or utc_now(), new.expires_at
            value, meta = rows.stored_metadata(new.metadata)
            new_id = conn.execute(
                "INSERT INTO episodes(session_id, user_message, ai_response, token_count, metadata,"
                " created_at, user_id, agent_id, expires_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (new.session_id, new.user_message, new.ai_response, new.token_count, value, created, user, agent,
                 expires)).fetchone()[0]
            stored.append(Episode(new_id, new.session_id, new.user_message, new.ai_response,
                                  new.token_count, meta, created, user, agent, expires))
        return stored

    def update(self, episode_id: int, changes: EpisodeChanges) -> tuple[Episode, Episode] | None:
        old = self.get(episode_id)
        if old is None:
            return None
        new = merged(changes, old)
        user, ai, tokens = new["user_message"], new["ai_response"], new["token_count"]
        value, meta = rows.stored_metadata(new["metadata"])
        self._conn.execute(
            "UPDATE episodes SET user_message = %s, ai_response = %s, token_count = %s, metadata = %s WHERE id = %s",
            (user, ai, tokens, value, episode_id))
        return old, replace(old, user_message=user, ai_response=ai, token_count=tokens, metadata=meta)

    def get(self, episode_id: int) -> Episode | None:
        row = self._conn.execute(f"SELECT {_COLUMNS} FROM episodes WHERE id = %s", (episode_id,)).fetchone()
        return rows.episode_of(row) if row else None

    def delete(self, episode_id: int) -> bool:
        return self._delete("episodes", episode_id)

    def delete_expired(self, now: str, limit: int) -> list[int]:
        return expire(self._conn, "episodes", now, limit)


def expire(conn: psycopg.Connection, table: str, now: str, limit: int) -> list[int]:
    """Delete up to ``limit`` expired rows of ``table``, oldest expiry first; their ids in that order.
    SKIP LOCKED: replicas sweeping at once take different rows instead of waiting on each other."""
    found = conn.execute(
        f"WITH gone AS (DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE expires_at IS NOT NULL"
        f" AND expires_at <= %s ORDER BY expires_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
        " RETURNING id, expires_at) SELECT id FROM gone ORDER BY expires_at, id", (now, limit)).fetchall()
    return [r[0] for r in found]
