"""Keyword search on SQLite: one FTS5 table ``<kind>_fts`` per record kind, BM25 ranked."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from adapters.sqlite import rows
from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.reads import Reads
from domain.errors import Invalid
from domain.keywords import KeywordPlan, KeywordQuery, counted, fits_whatever_it_matches, within_budget
from adapters.sqlite.filters import metadata_sql
from domain.filters import MetadataFilter
from domain.models import KeywordHit, Owner, format_timestamp, utc_now
from domain.record_kinds import KINDS, Source

log = logging.getLogger("nexusai.keywords")


class SqliteKeywordIndex(Reads):
    parses_query_syntax = True  # mode ``fts`` is FTS5's query language

    def __init__(self, db: SqliteDatabase) -> None:
        super().__init__(db)
        self._memo = CountMemo()

    async def search(
        self, source: Source, query: KeywordQuery, limit: int, session_id: int | None = None,
        since: datetime | None = None, until: datetime | None = None, owner: Owner = Owner(),
        metadata: MetadataFilter | None = None, global_records: bool = False,
    ) -> list[KeywordHit]:
        if query.is_empty or limit <= 0:
            return []
        table, fts, mapper = source, f"{source}_fts", rows.ROW_OF[source]
        where, params = [f"{fts} MATCH ?"], [None]  # the MATCH expression: the plan's, set in op
        if session_id is not None and KINDS[source].in_sessions:
            where.append("t.session_id = ?")
            params.append(session_id)
        if since is not None:
            where.append("t.created_at >= ?")
            params.append(format_timestamp(since))
        if until is not None:
            where.append("t.created_at <= ?")
            params.append(format_timestamp(until))
        mine, agent = [], owner.agent_id is not None and KINDS[source].in_sessions
        if owner.user_id is not None:
            mine.append("t.user_id = ?")
            params.append(owner.user_id)
        if agent:
            mine.append("t.agent_id = ?")
            params.append(owner.agent_id)
        if mine:
            where.append(f"(({' AND '.join(mine)}) OR t.user_id IS NULL)" if global_records else " AND ".join(mine))
        if metadata:
            sql, values = metadata_sql(metadata, "t.metadata")
            where.append(sql)
            params.extend(values)
        now = utc_now()
        scoped = len(where) > 1
        if not scoped:
            # Unfiltered: take the top k from the index first and join only those rows (about half
            # the time of joining every match before the LIMIT, measured at 1M episodes). From the
            # rowid on (param 1): all matches, or the newest when the plan bounds them.
            sql = (
                f"WITH top AS (SELECT rowid AS id, bm25({fts}) AS rank_score FROM {fts} WHERE {fts} MATCH ?"
                f" AND rowid >= ? ORDER BY rank_score, rowid LIMIT ?+0)"
                f" SELECT t.*, top.rank_score FROM top JOIN {table} t ON t.id = top.id"
                f" WHERE {rows.live('t.')} ORDER BY top.rank_score, t.id"
            )
            params.extend((-(1 << 63), limit, now))
        else:
            sql = (
                f"SELECT t.*, bm25({fts}) AS rank_score FROM {fts} JOIN {table} t ON t.id = {fts}.rowid"
                f" WHERE {' AND '.join(where)} AND {rows.live('t.')} ORDER BY rank_score, t.id LIMIT ?+0"
            )
            params.extend((now, limit))

        loop_thread = threading.get_ident()

        def op(conn: sqlite3.Connection) -> list[KeywordHit]:
            values = list(params)  # each run plans afresh (a short read interrupted runs again)
            try:
                plan = _plan(conn, table, query, scoped, self._memo)
                if (plan.matches or 0) > LONG_RANKING and threading.get_ident() == loop_thread:
                    raise _RanksLong  # on the loop: the ranking would run past its step budget
                values[0] = rows.fts_match(plan.query)
                if plan.newest is not None:  # rank only the newest matches: from the oldest of those on
                    values[1] = conn.execute(
                        f"SELECT min(rowid) FROM (SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT ?+0)",
                        (values[0], plan.newest)).fetchone()[0]
                found = conn.execute(sql, values).fetchall()
            except sqlite3.OperationalError as exc:
                if query.mode == "fts":
                    raise Invalid(f"invalid FTS5 query: {exc}", field="q") from None
                raise
            return [KeywordHit(mapper(r), -r["rank_score"]) for r in found]

        # Short at small scale (the counts, then the top k); past the step budget, on a reader thread.
        try:
            return await self._db.read_short(op, site=(source, scoped))
        except _RanksLong:
            # The reader plans again: its counts are remembered on its own connection, where the
            # next searches for these words will mostly run (with requests in flight reads go there).
            return await self._db.read(op)


# Matches beyond which ranking them takes more than a short read's step budget (10,000 VM steps):
# the bench's searches took ~7 steps per match to count and 20-30 to rank (plus the top rows). Such a
# search, tried on the event loop, ran into the budget and ran again on a reader thread: at 20k
# episodes 3 % of the searches did, at ~2.7 ms of CPU each, 28 % of all the searches' CPU. Its
# counts tell it apart first, so it goes to a reader thread at once, and the rest stay on the loop.
LONG_RANKING = 300


class _RanksLong(Exception):
    """Raised on the loop thread by a search whose plan ranks more than ``LONG_RANKING`` matches."""


def _plan(conn: sqlite3.Connection, table: str, query: KeywordQuery, scoped: bool, memo: "CountMemo") -> KeywordPlan:
    """`within_budget` over match counts taken from the FTS index, each counted up to the budget + 1
    (none when the table's highest id bounds them within it: a small store never counts)."""
    fts = f"{table}_fts"
    known = memo.known(conn)
    most = known.get(table)
    if most is None:
        most = known[table] = conn.execute(f"SELECT ifnull(max(id), 0) FROM {table}").fetchone()[0]
    if fits_whatever_it_matches(query, most):
        return KeywordPlan(query)
    counts = memo.counts(conn, fts, counted(query), known)
    plan = within_budget(query, counts, scoped)
    if plan.bounded:
        log.debug("keyword search on %s over its budget of %s matches: left out %s, newest %s",
                  fts, query.budget, plan.dropped, plan.newest)
    return plan


class CountMemo:
    """What a search plans with — each table's highest id and the match counts already taken — per
    reader connection, kept while that connection sees the database unchanged (``PRAGMA
    data_version`` moves when another connection commits; readers never write). A search repeated,
    or a term seen before, is not counted again until a write."""

    MAX_ENTRIES = 4096

    def __init__(self) -> None:
        self._by_connection: dict[sqlite3.Connection, tuple[tuple, dict]] = {}

    def known(self, conn: sqlite3.Connection) -> dict:
        """What is remembered for ``conn``'s view of the database (emptied when that view has changed):
        table -> highest id, (fts, MATCH expression, limit) -> count."""
        # data_version: others' commits; total_changes: this connection's own (the in-memory
        # database reads on its writer)
        version = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        seen, known = self._by_connection.get(conn, (None, None))
        if seen != version or known is None or len(known) > self.MAX_ENTRIES:
            known = {}
            self._by_connection[conn] = (version, known)
        return known

    def counts(self, conn: sqlite3.Connection, fts: str, parts: tuple[KeywordQuery, ...],
               known: dict) -> dict[KeywordQuery, int]:
        """The count of each part, from ``known`` (what ``known(conn)`` answered) or taken now."""
        counts = {}
        for part in parts:
            key = (fts, rows.fts_match(part), (part.budget or 0) + 1)
            if key not in known:
                known[key] = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT ?+0)",
                                          key[1:]).fetchone()[0]
            counts[part] = known[key]
        return counts
