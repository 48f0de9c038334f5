"""Episodes on SQLite (their keyword index follows by trigger, see schema.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from adapters.sqlite import rows
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.reads import Reads, Writes, in_list
from domain.errors import NotFound
from domain.models import Episode, EpisodeChanges, Neighbours, NewEpisode, Page, merged, utc_now

# One statement: two seeks per episode on (session_id, created_at, id), done inside SQLite;
# row values compare the (created_at, id) pair the way list() orders it.
_NEIGHBOURS = """
    WITH t AS (SELECT id, session_id, created_at FROM episodes WHERE id IN ({ids}))
    SELECT t.id, 0, e.id, e.created_at FROM t JOIN episodes e ON e.id IN (
        SELECT b.id FROM episodes b WHERE b.session_id = t.session_id
        AND (b.created_at, b.id) < (t.created_at, t.id) ORDER BY b.created_at DESC, b.id DESC LIMIT ?+0)
    UNION ALL
    SELECT t.id, 1, e.id, e.created_at FROM t JOIN episodes e ON e.id IN (
        SELECT a.id FROM episodes a WHERE a.session_id = t.session_id
        AND (a.created_at, a.id) > (t.created_at, t.id) ORDER BY a.created_at, a.id LIMIT ?+0)
    UNION ALL
    SELECT t.id, -1, NULL, NULL FROM t"""


class SqliteEpisodes(Reads):
    async def get(self, episode_id: int) -> Episode | None:
        return await self._one(f"SELECT * FROM episodes WHERE id = ? AND {rows.live()}", (episode_id, utc_now()),
                               rows.episode_of)

    async def get_many(self, episode_ids: Sequence[int]) -> list[Episode]:
        return await self._many_by_id("episodes", episode_ids, rows.episode_of, live=True)

    async def list(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        return await self._page(
            "episodes", f"session_id = ? AND {rows.live()}", (session_id, utc_now()), "created_at, id", limit,
            offset, rows.episode_of,
        )

    async def recent(self, session_id: int, limit: int) -> list[Episode]:
        return await self._all(
            f"SELECT * FROM episodes WHERE session_id = ? AND {rows.live()} ORDER BY created_at DESC, id DESC LIMIT ?+0",
            (session_id, utc_now(), limit), rows.episode_of,
        )

    async def neighbours(self, episode_ids: Sequence[int], window: int) -> dict[int, Neighbours]:
        wanted = list(dict.fromkeys(episode_ids))
        if not wanted or window <= 0:
            return {}
        sql = _NEIGHBOURS.format(ids=in_list(wanted))

        def op(conn: sqlite3.Connection) -> dict[int, Neighbours]:
            sides: dict[int, tuple[list, list]] = {}
            for target, side, other, created_at in conn.execute(sql, [*wanted, window, window]):
                pair = sides.setdefault(target, ([], []))
                if side >= 0:
                    pair[side].append((created_at, other))
            return {
                target: Neighbours(before=[i for _, i in sorted(before, reverse=True)], after=[i for _, i in sorted(after)])
                for target, (before, after) in sides.items()
            }

        return await self._db.read_short(op)


class EpisodeTx(Writes):
    __slots__ = ()

    def insert(self, episodes: Sequence[NewEpisode]) -> list[Episode]:
        conn = self._conn
        owners: dict[int, tuple] = {}
        stored: list[Episode] = []
        for new in episodes:
            if new.session_id not in owners:
                row = conn.execute("SELECT user_id, agent_id FROM sessions WHERE id = ?", (new.session_id,)).fetchone()
                if row is None:
                    raise NotFound(f"session {new.session_id} does not exist", field="sessionId")
                owners[new.session_id] = (row[0], row[1])
            user, agent = owners[new.session_id]
            created, expires = new.created_at or utc_now(), new.expires_at
            text, meta = rows.stored_metadata(new.metadata)
            cur = conn.execute(
                "INSERT INTO episodes(session_id, user_message, ai_response, token_count, metadata,"
                " created_at, user_id, agent_id, expires_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (new.session_id, new.user_message, new.ai_response, new.token_count, text, created, user, agent,
                 expires),
            )
            stored.append(Episode(cur.lastrowid, new.session_id, new.user_message, new.ai_response,
                                  new.token_count, meta, created, user, agent, expires))
        return stored

    def update(self, episode_id: int, changes: EpisodeChanges) -> tuple[Episode, Episode] | None:
        row = self._conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if row is None:
            return None
        old = rows.episode_of(row)
        new = merged(changes, old)
        user, ai, tokens = new["user_message"], new["ai_response"], new["token_count"]
        text, meta = rows.stored_metadata(new["metadata"])
        self._conn.execute(
            "UPDATE episodes SET user_message = ?, ai_response = ?, token_count = ?, metadata = ? WHERE id = ?",
            (user, ai, tokens, text, episode_id),
        )
        return old, replace(old, user_message=user, ai_response=ai, token_count=tokens, metadata=meta)

    def get(self, episode_id: int) -> Episode | None:
        row = self._conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        return rows.episode_of(row) if row else None

    def delete(self, episode_id: int) -> bool:
        return self._delete("episodes", episode_id)

    def delete_expired(self, now: str, limit: int) -> list[int]:
        return [r[0] for r in self._conn.execute(
            "DELETE FROM episodes WHERE id IN (SELECT id FROM episodes WHERE expires_at IS NOT NULL AND expires_at <= ?"
            " ORDER BY expires_at, id LIMIT ?+0) RETURNING id", (now, limit))]
