"""Keyset lists on PostgreSQL: one statement per page, ``(created_at, id)`` row values against the cursor."""

from __future__ import annotations

from adapters.postgres import rows
from adapters.postgres.filters import metadata_sql
from adapters.postgres.reads import Reads
from domain.listing import Listed, ListQuery
from domain.listing import page_from
from domain.models import Entity, Episode, Relationship, Session, Summary, utc_now


class PostgresListing(Reads):
    async def _list(self, table: str, query: ListQuery, where: list[tuple[str, list]], mapper) -> Listed:
        clauses, params = [], []
        for sql, values in [*where, metadata_sql(query.metadata)]:
            clauses.append(sql)
            params.extend(values)
        direction = "ASC" if query.order == "asc" else "DESC"
        if query.after is not None:
            clauses.append(f"(created_at, id) {'>' if query.order == 'asc' else '<'} (%s, %s)")
            params.extend((query.after.created_at, query.after.id))
        sql = (f"SELECT {rows.columns(table)} FROM {table} WHERE {' AND '.join(clauses)}"
               f" ORDER BY created_at {direction}, id {direction} LIMIT %s")
        found = await self._all(sql, [*params, query.limit + 1], mapper)
        return page_from(found, query.limit)

    @staticmethod
    def _equal(query: ListQuery, *columns: str, live: bool = False) -> list[tuple[str, list]]:
        """``column = %s`` for each of ``columns`` the query sets (the column is the field's name)."""
        where = [(f"{c} = %s", [getattr(query, c)]) for c in columns if getattr(query, c) is not None]
        return [*where, (rows.live(), [utc_now()])] if live else where

    async def sessions(self, query: ListQuery) -> Listed[Session]:
        return await self._list("sessions", query, self._equal(query, "user_id", "agent_id"), rows.session_of)

    async def episodes(self, query: ListQuery) -> Listed[Episode]:
        where = self._equal(query, "session_id", "user_id", "agent_id", live=True)
        return await self._list("episodes", query, where, rows.episode_of)

    async def entities(self, query: ListQuery) -> Listed[Entity]:
        return await self._list("entities", query, self._equal(query, "type", "user_id", live=True), rows.entity_of)

    async def relationships(self, query: ListQuery) -> Listed[Relationship]:
        where = self._equal(query, "label", "user_id")
        if query.entity_id is not None:
            where.append(("(from_id = %s OR to_id = %s)", [query.entity_id, query.entity_id]))
        if query.as_of is not None:  # the rule of Relationship.valid_at
            where.append(("(valid_from IS NULL OR valid_from <= %s) AND (valid_to IS NULL OR valid_to > %s)",
                          [query.as_of, query.as_of]))
        return await self._list("relationships", query, where, rows.relationship_of)

    async def summaries(self, query: ListQuery) -> Listed[Summary]:
        where = self._equal(query, "session_id", "user_id", "agent_id", live=True)
        return await self._list("summaries", query, where, rows.summary_of)
