"""``SqliteMemoryStore``: the memory store on one SQLite file with FTS5 keyword indexes."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from adapters.sqlite import rows
from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.schema import migrate
from domain.errors import Conflict, Invalid, NotFound
from domain.keywords import KeywordQuery
from domain.models import (
    Entity, Episode, EpisodeChanges, KeywordHit, Metadata, Neighbours, NewEntity, NewEpisode,
    NewRelationship, NewSummary, Page, Relationship, Session, Summary, Upserted, format_timestamp, utc_now,
)
from domain.outbox import Backlog, OutboxJob
from ports.memory_store import Direction, Source

_FTS = {
    "episodes": ("episodes_fts", "episodes", rows.episode_of),
    "summaries": ("summaries_fts", "summaries", rows.summary_of),
    "entities": ("entities_fts", "entities", rows.entity_of),
}
_TABLES = ("sessions", "episodes", "entities", "relationships", "summaries", "embedding_outbox")


def _enqueue(conn: sqlite3.Connection, collection: str, op: str, ref_id: int, now: str) -> None:
    conn.execute(
        "INSERT INTO embedding_outbox(collection, op, ref_id, next_attempt_at, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (collection, op, ref_id, now, now),
    )


def _in_list(ids: Sequence[int]) -> str:
    return ",".join("?" * len(ids))


class SqliteMemoryStore:
    supports_fts_syntax = True

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    @classmethod
    def open(cls, path: str, synchronous: str = "full") -> "SqliteMemoryStore":
        """Open (creating and migrating as needed) the database at ``path``."""
        db = SqliteDatabase(path, synchronous)
        try:
            db.write_sync(migrate)
        except BaseException:
            db.close()
            raise
        return cls(db)

    @property
    def database(self) -> SqliteDatabase:
        return self._db

    # -- sessions ------------------------------------------------------------------------------
    async def create_session(self, external_id: str, metadata: Metadata) -> Session:
        def op(conn: sqlite3.Connection) -> Session:
            now = utc_now()
            text, meta = rows.stored_metadata(metadata)
            try:
                cur = conn.execute(
                    "INSERT INTO sessions(external_id, metadata, created_at, updated_at) VALUES (?,?,?,?)",
                    (external_id, text, now, now),
                )
            except sqlite3.IntegrityError:
                raise Conflict(f"a session with externalId {external_id!r} exists", field="externalId")
            return Session(cur.lastrowid, external_id, meta, now, now)

        return await self._db.write(op)

    async def get_session(self, session_id: int) -> Session | None:
        return await self._one("SELECT * FROM sessions WHERE id = ?", (session_id,), rows.session_of)

    async def get_session_by_external_id(self, external_id: str) -> Session | None:
        return await self._one("SELECT * FROM sessions WHERE external_id = ?", (external_id,), rows.session_of)

    async def list_sessions(self, limit: int, offset: int) -> Page[Session]:
        return await self._page("sessions", "1", (), "id", limit, offset, rows.session_of)

    async def update_session(self, session_id: int, metadata: Metadata) -> Session | None:
        def op(conn: sqlite3.Connection) -> Session | None:
            conn.execute(
                "UPDATE sessions SET metadata = ?, updated_at = ? WHERE id = ?",
                (rows.dump_metadata(metadata), utc_now(), session_id),
            )
            row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            return rows.session_of(row) if row else None

        return await self._db.write(op)

    async def delete_session(self, session_id: int) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount == 0:
                return False
            now = utc_now()
            _enqueue(conn, "episodes", "delete_session", session_id, now)
            _enqueue(conn, "summaries", "delete_session", session_id, now)
            return True

        return await self._db.write(op)

    # -- episodes ------------------------------------------------------------------------------
    async def add_episodes(self, episodes: Sequence[NewEpisode]) -> list[Episode]:
        # Validated before the writer thread: a bad timestamp is the caller's error, not the database's.
        times = [rows.canonical_timestamp(new.created_at) for new in episodes]

        def op(conn: sqlite3.Connection) -> list[Episode]:
            known: set[int] = set()
            stored: list[Episode] = []
            for new, given in zip(episodes, times):
                if new.session_id not in known:
                    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (new.session_id,)).fetchone() is None:
                        raise NotFound(f"session {new.session_id} does not exist", field="sessionId")
                    known.add(new.session_id)
                now = utc_now()
                created = given or now
                text, meta = rows.stored_metadata(new.metadata)
                cur = conn.execute(
                    "INSERT INTO episodes(session_id, user_message, ai_response, token_count, metadata,"
                    " created_at) VALUES (?,?,?,?,?,?)",
                    (new.session_id, new.user_message, new.ai_response, new.token_count, text, created),
                )
                _enqueue(conn, "episodes", "upsert", cur.lastrowid, now)
                stored.append(Episode(cur.lastrowid, new.session_id, new.user_message, new.ai_response,
                                      new.token_count, meta, created))
            return stored

        return await self._db.write(op)

    async def get_episode(self, episode_id: int) -> Episode | None:
        return await self._one("SELECT * FROM episodes WHERE id = ?", (episode_id,), rows.episode_of)

    async def get_episodes(self, episode_ids: Sequence[int]) -> list[Episode]:
        return await self._many_by_id("episodes", episode_ids, rows.episode_of)

    async def update_episode(self, episode_id: int, changes: EpisodeChanges) -> Episode | None:
        def op(conn: sqlite3.Connection) -> Episode | None:
            row = conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
            if row is None:
                return None
            old = rows.episode_of(row)
            user = old.user_message if changes.user_message is None else changes.user_message
            ai = old.ai_response if changes.ai_response is None else changes.ai_response
            tokens = old.token_count if changes.token_count is None else changes.token_count
            text, meta = rows.stored_metadata(old.metadata if changes.metadata is None else changes.metadata)
            conn.execute(
                "UPDATE episodes SET user_message = ?, ai_response = ?, token_count = ?, metadata = ?"
                " WHERE id = ?",
                (user, ai, tokens, text, episode_id),
            )
            if (user, ai) != (old.user_message, old.ai_response):
                _enqueue(conn, "episodes", "upsert", episode_id, utc_now())
            return Episode(episode_id, old.session_id, user, ai, tokens, meta, old.created_at)

        return await self._db.write(op)

    async def delete_episode(self, episode_id: int) -> bool:
        return await self._delete_embedded("episodes", episode_id)

    async def list_episodes(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        return await self._page(
            "episodes", "session_id = ?", (session_id,), "created_at, id", limit, offset, rows.episode_of
        )

    async def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        return await self._all(
            "SELECT * FROM episodes WHERE session_id = ? ORDER BY created_at DESC, id DESC LIMIT ?",
            (session_id, limit), rows.episode_of,
        )

    async def episode_neighbours(self, episode_ids: Sequence[int], window: int) -> dict[int, Neighbours]:
        wanted = list(dict.fromkeys(episode_ids))
        if not wanted or window <= 0:
            return {}
        # One statement: two seeks per episode on (session_id, created_at, id), done inside SQLite;
        # row values compare the (created_at, id) pair the way list_episodes orders it.
        sql = f"""
            WITH t AS (SELECT id, session_id, created_at FROM episodes WHERE id IN ({_in_list(wanted)}))
            SELECT t.id, 0, e.id, e.created_at FROM t JOIN episodes e ON e.id IN (
                SELECT b.id FROM episodes b WHERE b.session_id = t.session_id
                AND (b.created_at, b.id) < (t.created_at, t.id) ORDER BY b.created_at DESC, b.id DESC LIMIT ?)
            UNION ALL
            SELECT t.id, 1, e.id, e.created_at FROM t JOIN episodes e ON e.id IN (
                SELECT a.id FROM episodes a WHERE a.session_id = t.session_id
                AND (a.created_at, a.id) > (t.created_at, t.id) ORDER BY a.created_at, a.id LIMIT ?)
            UNION ALL
            SELECT t.id, -1, NULL, NULL FROM t"""

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

        return await self._db.read(op)

    # -- keyword search ------------------------------------------------------------------------
    async def keyword_search(
        self, source: Source, query: KeywordQuery, limit: int, session_id: int | None = None,
        since: datetime | None = None, until: datetime | None = None,
    ) -> list[KeywordHit]:
        if query.is_empty or limit <= 0:
            return []
        fts, table, mapper = _FTS[source]
        where, params = [f"{fts} MATCH ?"], [rows.fts_match(query)]
        if session_id is not None and source != "entities":
            where.append("t.session_id = ?")
            params.append(session_id)
        if since is not None:
            where.append("t.created_at >= ?")
            params.append(format_timestamp(since))
        if until is not None:
            where.append("t.created_at <= ?")
            params.append(format_timestamp(until))
        if len(where) == 1:
            # Unfiltered: take the top k from the index first and join only those rows (about half
            # the time of joining every match before the LIMIT, measured at 1M episodes).
            sql = (
                f"WITH top AS (SELECT rowid AS id, bm25({fts}) AS rank_score FROM {fts} WHERE {fts} MATCH ?"
                f" ORDER BY rank_score, rowid LIMIT ?) SELECT t.*, top.rank_score FROM top JOIN {table} t ON t.id = top.id"
                " ORDER BY top.rank_score, t.id"
            )
        else:
            sql = (
                f"SELECT t.*, bm25({fts}) AS rank_score FROM {fts} JOIN {table} t ON t.id = {fts}.rowid"
                f" WHERE {' AND '.join(where)} ORDER BY rank_score, t.id LIMIT ?"
            )
        params.append(limit)

        def op(conn: sqlite3.Connection) -> list[KeywordHit]:
            try:
                found = conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if query.mode == "fts":
                    raise Invalid(f"invalid FTS5 query: {exc}", field="q") from None
                raise
            return [KeywordHit(mapper(r), -r["rank_score"]) for r in found]

        return await self._db.read(op)

    # -- entities and relationships ------------------------------------------------------------
    async def upsert_entity(self, entity: NewEntity) -> Upserted[Entity]:
        def op(conn: sqlite3.Connection) -> Upserted[Entity]:
            now = utc_now()
            row = conn.execute(
                "SELECT * FROM entities WHERE name = ? AND type = ?", (entity.name, entity.type)
            ).fetchone()
            if row is None:
                cur = conn.execute(
                    "INSERT INTO entities(name, type, notes, metadata, created_at, updated_at)"
                    " VALUES (?,?,?,?,?,?)",
                    (entity.name, entity.type, entity.notes, rows.dump_metadata(entity.metadata), now, now),
                )
                entity_id, created = cur.lastrowid, True
            else:
                entity_id, created = row["id"], False
                conn.execute(
                    "UPDATE entities SET notes = ?, metadata = ?, updated_at = ? WHERE id = ?",
                    (entity.notes, rows.dump_metadata(entity.metadata), now, entity_id),
                )
            _enqueue(conn, "entities", "upsert", entity_id, now)
            stored = conn.execute("SELECT * FROM entities WHERE id = ?", (entity_id,)).fetchone()
            return Upserted(rows.entity_of(stored), created)

        return await self._db.write(op)

    async def get_entity(self, entity_id: int) -> Entity | None:
        return await self._one("SELECT * FROM entities WHERE id = ?", (entity_id,), rows.entity_of)

    async def get_entities(self, entity_ids: Sequence[int]) -> list[Entity]:
        return await self._many_by_id("entities", entity_ids, rows.entity_of)

    async def list_entities_by_type(self, entity_type: str, limit: int, offset: int) -> Page[Entity]:
        return await self._page("entities", "type = ?", (entity_type,), "name, id", limit, offset, rows.entity_of)

    async def find_entities_by_name(self, name: str, limit: int) -> list[Entity]:
        # instr, not LIKE: % and _ in a name are literal, and casefold() folds beyond ASCII.
        needle = name.casefold()
        return await self._all(
            "SELECT * FROM entities WHERE instr(casefold(name), ?) > 0"
            " ORDER BY casefold(name) = ? DESC, name, id LIMIT ?",
            (needle, needle, limit), rows.entity_of,
        )

    async def entities_mentioned_in(self, texts: Sequence[str], limit: int) -> list[Entity]:
        haystack = "\n".join(texts).casefold()
        if not haystack.strip():
            return []
        found = await self._all(
            "SELECT * FROM entities WHERE length(name) > 0 AND instr(?, casefold(name)) > 0 ORDER BY id",
            (haystack,), rows.entity_of,
        )
        words = [e for e in found if re.search(rf"(?<!\w){re.escape(e.name.casefold())}(?!\w)", haystack)]
        return words[:limit]

    async def delete_entity(self, entity_id: int) -> bool:
        return await self._delete_embedded("entities", entity_id)

    async def upsert_relationship(self, relationship: NewRelationship) -> Upserted[Relationship]:
        r = relationship

        def op(conn: sqlite3.Connection) -> Upserted[Relationship]:
            for field, entity_id in (("fromId", r.from_id), ("toId", r.to_id)):
                if conn.execute("SELECT 1 FROM entities WHERE id = ?", (entity_id,)).fetchone() is None:
                    raise NotFound(f"entity {entity_id} does not exist", field=field)
            meta = rows.dump_metadata(r.metadata)
            cur = conn.execute(
                "INSERT INTO relationships(from_id, to_id, label, metadata, created_at) VALUES (?,?,?,?,?)"
                " ON CONFLICT(from_id, to_id, label) DO NOTHING",
                (r.from_id, r.to_id, r.label, meta, utc_now()),
            )
            created = cur.rowcount == 1
            if not created:
                conn.execute(
                    "UPDATE relationships SET metadata = ? WHERE from_id = ? AND to_id = ? AND label = ?",
                    (meta, r.from_id, r.to_id, r.label),
                )
            row = conn.execute(
                "SELECT * FROM relationships WHERE from_id = ? AND to_id = ? AND label = ?",
                (r.from_id, r.to_id, r.label),
            ).fetchone()
            return Upserted(rows.relationship_of(row), created)

        return await self._db.write(op)

    async def relationships_of(self, entity_id: int, direction: Direction) -> list[Relationship]:
        where = {"out": "from_id = ?", "in": "to_id = ?", "both": "(from_id = ? OR to_id = ?)"}[direction]
        params = (entity_id, entity_id) if direction == "both" else (entity_id,)
        return await self._all(
            f"SELECT * FROM relationships WHERE {where} ORDER BY created_at, id", params, rows.relationship_of
        )

    async def delete_relationship(self, from_id: int, to_id: int, label: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            return conn.execute(
                "DELETE FROM relationships WHERE from_id = ? AND to_id = ? AND label = ?", (from_id, to_id, label)
            ).rowcount > 0

        return await self._db.write(op)

    # -- summaries -----------------------------------------------------------------------------
    async def add_summary(self, summary: NewSummary) -> Summary:
        s = summary

        def op(conn: sqlite3.Connection) -> Summary:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (s.session_id,)).fetchone() is None:
                raise NotFound(f"session {s.session_id} does not exist", field="sessionId")
            now = utc_now()
            text, meta = rows.stored_metadata(s.metadata)
            cur = conn.execute(
                "INSERT INTO summaries(session_id, content, first_episode_id, last_episode_id, episode_count,"
                " token_count, metadata, created_at) VALUES (?,?,?,?,?,?,?,?)",
                (s.session_id, s.content, s.first_episode_id, s.last_episode_id, s.episode_count,
                 s.token_count, text, now),
            )
            _enqueue(conn, "summaries", "upsert", cur.lastrowid, now)
            return Summary(cur.lastrowid, s.session_id, s.content, s.first_episode_id, s.last_episode_id,
                           s.episode_count, s.token_count, meta, now)

        return await self._db.write(op)

    async def get_summary(self, summary_id: int) -> Summary | None:
        return await self._one("SELECT * FROM summaries WHERE id = ?", (summary_id,), rows.summary_of)

    async def get_summaries(self, summary_ids: Sequence[int]) -> list[Summary]:
        return await self._many_by_id("summaries", summary_ids, rows.summary_of)

    async def list_summaries(self, session_id: int) -> list[Summary]:
        return await self._all(
            "SELECT * FROM summaries WHERE session_id = ? ORDER BY created_at, id", (session_id,), rows.summary_of
        )

    async def delete_summary(self, summary_id: int) -> bool:
        return await self._delete_embedded("summaries", summary_id)

    # -- embedding outbox ----------------------------------------------------------------------
    async def due_jobs(self, limit: int, now: datetime) -> list[OutboxJob]:
        return await self._all(
            "SELECT * FROM embedding_outbox WHERE next_attempt_at <= ? AND dead_at IS NULL ORDER BY id LIMIT ?",
            (format_timestamp(now), limit), rows.job_of,
        )

    async def complete_jobs(self, job_ids: Sequence[int]) -> None:
        if not job_ids:
            return
        ids = list(job_ids)
        await self._db.write(
            lambda conn: conn.execute(f"DELETE FROM embedding_outbox WHERE id IN ({_in_list(ids)})", ids)
        )

    async def defer_jobs(self, job_ids: Sequence[int], error: str, retry_at: datetime) -> None:
        if not job_ids:
            return
        ids = list(job_ids)
        await self._db.write(lambda conn: conn.execute(
            "UPDATE embedding_outbox SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?"
            f" WHERE id IN ({_in_list(ids)})", [error[:500], format_timestamp(retry_at), *ids],
        ))

    async def bury_jobs(self, job_ids: Sequence[int], error: str) -> None:
        if not job_ids:
            return
        ids = list(job_ids)
        await self._db.write(lambda conn: conn.execute(
            "UPDATE embedding_outbox SET attempts = attempts + 1, last_error = ?, dead_at = ?"
            f" WHERE id IN ({_in_list(ids)})", [error[:500], utc_now(), *ids],
        ))

    async def dead_jobs(self, limit: int) -> list[OutboxJob]:
        return await self._all(
            "SELECT * FROM embedding_outbox WHERE dead_at IS NOT NULL ORDER BY id LIMIT ?", (limit,), rows.job_of,
        )

    async def retry_dead_jobs(self, job_ids: Sequence[int] | None = None) -> int:
        ids = list(job_ids or [])
        where = f" AND id IN ({_in_list(ids)})" if job_ids is not None else ""
        if job_ids is not None and not ids:
            return 0
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

    async def enqueue_reindex(self, collection: Source) -> int:
        def op(conn: sqlite3.Connection) -> int:
            now = utc_now()
            return conn.execute(
                "INSERT INTO embedding_outbox(collection, op, ref_id, next_attempt_at, created_at)"
                f" SELECT ?, 'upsert', id, ?, ? FROM {_FTS[collection][1]} ORDER BY id",
                (collection, now, now),
            ).rowcount

        return await self._db.write(op)

    # -- operations ----------------------------------------------------------------------------
    async def counts(self) -> dict[str, int]:
        def op(conn: sqlite3.Connection) -> dict[str, int]:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _TABLES}

        return await self._db.read(op)

    async def sizes(self) -> dict[str, int]:
        def op(conn: sqlite3.Connection) -> dict[str, int]:
            page = conn.execute("PRAGMA page_size").fetchone()[0]
            found = {"database": page * conn.execute("PRAGMA page_count").fetchone()[0]}
            # Stored embeddings (float16): what rebuilding the vector index without the embedder costs.
            found["embeddings"] = conn.execute(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ('embeddings',"
                " 'sqlite_autoindex_embeddings_1')").fetchone()[0]
            for fts, _table, _mapper in _FTS.values():
                found[fts] = conn.execute(
                    "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE ?", (f"{fts}%",)
                ).fetchone()[0]
            return found

        return await self._db.read(op)

    async def health(self) -> str | None:
        # A real write through the writer thread (one row rewritten in a scratch table): a read
        # succeeds on a full disk, a read-only file or after an I/O error that fails every write.
        try:
            await self._db.write(lambda conn: conn.execute(
                "INSERT INTO health_probe(id, checked_at) VALUES (1, ?)"
                " ON CONFLICT(id) DO UPDATE SET checked_at = excluded.checked_at", (utc_now(),)))
            return None
        except Exception as exc:  # health must report, never raise
            return f"{type(exc).__name__}: {exc}"

    async def close(self) -> None:
        self._db.close()

    # -- helpers -------------------------------------------------------------------------------
    async def _delete_embedded(self, table: str, item_id: int) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(f"DELETE FROM {table} WHERE id = ?", (item_id,)).rowcount == 0:
                return False
            _enqueue(conn, table, "delete", item_id, utc_now())
            return True

        return await self._db.write(op)

    async def _one(self, sql, params, mapper):
        """One row by primary key or unique index: a point read, answered without a thread hop."""
        def op(conn: sqlite3.Connection):
            row = conn.execute(sql, params).fetchone()
            return mapper(row) if row else None

        return await self._db.read_point(op)

    async def _all(self, sql, params, mapper) -> list:
        return await self._db.read(lambda conn: [mapper(r) for r in conn.execute(sql, params).fetchall()])

    async def _many_by_id(self, table: str, ids: Sequence[int], mapper) -> list:
        if not ids:
            return []
        wanted = list(dict.fromkeys(ids))
        found = await self._all(f"SELECT * FROM {table} WHERE id IN ({_in_list(wanted)})", wanted, mapper)
        by_id = {item.id: item for item in found}
        return [by_id[i] for i in wanted if i in by_id]

    async def _page(self, table, where, params, order, limit, offset, mapper) -> Page:
        def op(conn: sqlite3.Connection) -> Page:
            total = conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]
            found = conn.execute(
                f"SELECT * FROM {table} WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?", (*params, limit, offset)
            ).fetchall()
            return Page([mapper(r) for r in found], total, limit, offset)

        return await self._db.read(op)
