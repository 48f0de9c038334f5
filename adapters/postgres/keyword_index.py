"""Keyword search on PostgreSQL: a generated ``tsvector`` column with a GIN index per record kind.

Ranking is BM25 computed in SQL over the matching rows (``bm25.py``), the same function SQLite's
FTS5 ranks with, so a store moved between the two ranks its keyword results alike. A query over
its match budget is planned as on SQLite (``domain.keywords.within_budget``), from match counts
the GIN index takes, each stopped past the budget.
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from adapters.postgres import rows
from adapters.postgres.bm25 import Statistics, ranked
from adapters.postgres.database import PostgresDatabase
from adapters.postgres.filters import metadata_sql
from adapters.postgres.reads import Reads
from adapters.postgres.schema import TEXT_CONFIG
from adapters.postgres.tsquery import tsquery_of
from domain.filters import MetadataFilter
from domain.keywords import KeywordPlan, KeywordQuery, counted, fits_whatever_it_matches, within_budget
from domain.models import KeywordHit, Owner, format_timestamp, utc_now
from domain.record_kinds import KINDS, Source


class PostgresKeywordIndex(Reads):
    parses_query_syntax = True  # mode ``fts`` is FTS5's query language, parsed in tsquery.py

    def __init__(self, db: PostgresDatabase) -> None:
        super().__init__(db)
        self._statistics = Statistics()

    async def search(
        self, source: Source, query: KeywordQuery, limit: int, session_id: int | None = None,
        since: datetime | None = None, until: datetime | None = None, owner: Owner = Owner(),
        metadata: MetadataFilter | None = None, global_records: bool = False,
    ) -> list[KeywordHit]:
        if query.is_empty or limit <= 0 or tsquery_of(query) is None:  # Invalid (q) before any I/O
            return []
        where, params = [], []
        if session_id is not None and KINDS[source].in_sessions:
            where.append("t.session_id = %s")
            params.append(session_id)
        if since is not None:
            where.append("t.created_at >= %s")
            params.append(format_timestamp(since))
        if until is not None:
            where.append("t.created_at <= %s")
            params.append(format_timestamp(until))
        mine, agent = [], owner.agent_id is not None and KINDS[source].in_sessions
        if owner.user_id is not None:
            mine.append("t.user_id = %s")
            params.append(owner.user_id)
        if agent:
            mine.append("t.agent_id = %s")
            params.append(owner.agent_id)
        if mine:
            where.append(f"(({' AND '.join(mine)}) OR t.user_id IS NULL)" if global_records else " AND ".join(mine))
        if metadata:
            sql, values = metadata_sql(metadata, "t.metadata")
            where.append(sql)
            params.extend(values)
        scoped = bool(where)
        mapper = rows.ROW_OF[source]

        def op(conn: psycopg.Connection) -> list[KeywordHit]:
            most = conn.execute(f"SELECT coalesce(max(id), 0) FROM {source}").fetchone()[0]
            plan = self._plan(conn, source, query, scoped, most)
            text = tsquery_of(plan.query)
            if text is None:
                return []
            clauses, values = [rows.live("t."), *where], [utc_now(), *params]
            if plan.newest is not None:  # rank only the newest matches: from the oldest of those on
                clauses.append(f"t.id >= (SELECT min(id) FROM (SELECT id FROM {source} WHERE tsv @@"
                               f" to_tsquery('{TEXT_CONFIG}', %s) ORDER BY id DESC LIMIT %s) AS newest)")
                values.extend((text, plan.newest))
            found = ranked(conn, self._statistics, source, text, most, " AND ".join(clauses), values, limit)
            return [KeywordHit(mapper(r), r["rank_score"]) for r in found]

        return await self._db.read(op)

    def _plan(self, conn: psycopg.Connection, table: str, query: KeywordQuery, scoped: bool, most: int) -> KeywordPlan:
        """``within_budget`` over match counts from the GIN index, each counted up to the budget + 1
        (none when the table's highest id bounds them within it: a small store never counts)."""
        if fits_whatever_it_matches(query, most):
            return KeywordPlan(query)
        counts = {}
        for part in counted(query):
            text = tsquery_of(part)
            counts[part] = 0 if text is None else self._statistics.matches(conn, table, most, text, (part.budget or 0) + 1)
        return within_budget(query, counts, scoped)
