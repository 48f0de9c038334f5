"""Keyword search on PostgreSQL: a generated ``tsvector`` column with a GIN index per record kind.

Ranking is BM25 computed in SQL over the matching rows (``bm25.py``), the same function SQLite's
FTS5 ranks with, so a store moved between the two ranks its keyword results alike.
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from adapters.postgres import rows
from adapters.postgres.bm25 import ranked_sql
from adapters.postgres.filters import metadata_sql
from adapters.postgres.reads import Reads
from adapters.postgres.tsquery import tsquery_of
from domain.filters import MetadataFilter
from domain.keywords import KeywordQuery
from domain.models import KeywordHit, Owner, format_timestamp, utc_now
from domain.record_kinds import KINDS, Source


class PostgresKeywordIndex(Reads):
    parses_query_syntax = True  # mode ``fts`` is FTS5's query language, parsed in tsquery.py

    async def search(
        self, source: Source, query: KeywordQuery, limit: int, session_id: int | None = None,
        since: datetime | None = None, until: datetime | None = None, owner: Owner = Owner(),
        metadata: MetadataFilter | None = None,
    ) -> list[KeywordHit]:
        if query.is_empty or limit <= 0:
            return []
        text = tsquery_of(query)  # Invalid (q) for a malformed fts query, before any I/O
        if text is None:
            return []
        where, params = [rows.live("t.")], [utc_now()]
        if session_id is not None and KINDS[source].in_sessions:
            where.append("t.session_id = %s")
            params.append(session_id)
        if since is not None:
            where.append("t.created_at >= %s")
            params.append(format_timestamp(since))
        if until is not None:
            where.append("t.created_at <= %s")
            params.append(format_timestamp(until))
        if owner.user_id is not None:
            where.append("t.user_id = %s")
            params.append(owner.user_id)
        if owner.agent_id is not None and KINDS[source].in_sessions:
            where.append("t.agent_id = %s")
            params.append(owner.agent_id)
        if metadata:
            sql, values = metadata_sql(metadata, "t.metadata")
            where.append(sql)
            params.extend(values)
        sql, head = ranked_sql(source, " AND ".join(where))
        mapper = rows.ROW_OF[source]

        def op(conn: psycopg.Connection) -> list[KeywordHit]:
            found = conn.execute(sql, [*head(text), *params, limit]).fetchall()
            return [KeywordHit(mapper(r), r["rank_score"]) for r in found]

        return await self._db.read(op)
