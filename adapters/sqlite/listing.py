"""Keyset lists on SQLite: one statement per page, ``(created_at, id)`` row values against the cursor."""

from __future__ import annotations

from adapters.sqlite import rows
from adapters.sqlite.filters import metadata_sql
from adapters.sqlite.reads import Reads
from domain.listing import Listed, ListQuery, page_from
from domain.models import Entity, Episode, Relationship, Session, Summary


class SqliteListing(Reads):
    async def _page(self, table: str, query: ListQuery, where: list[tuple[str, list]], mapper) -> Listed:
        clauses, params = [], []
        for sql, values in [*where, metadata_sql(query.metadata)]:
            clauses.append(sql)
            params.extend(values)
        direction = "ASC" if query.order == "asc" else "DESC"
        if query.after is not None:
            clauses.append(f"(created_at, id) {'>' if query.order == 'asc' else '<'} (?, ?)")
            params.extend((query.after.created_at, query.after.id))
        sql = (f"SELECT * FROM {table} WHERE {' AND '.join(clauses)}"
               f" ORDER BY created_at {direction}, id {direction} LIMIT ?")
        found = await self._all(sql, [*params, query.limit + 1], mapper)
        return page_from(found, query.limit)

    @staticmethod
    def _equal(column: str, value) -> list[tuple[str, list]]:
        return [] if value is None else [(f"{column} = ?", [value])]

    async def sessions(self, query: ListQuery) -> Listed[Session]:
        return await self._page("sessions", query, [], rows.session_of)

    async def episodes(self, query: ListQuery) -> Listed[Episode]:
        return await self._page("episodes", query, self._equal("session_id", query.session_id), rows.episode_of)

    async def entities(self, query: ListQuery) -> Listed[Entity]:
        return await self._page("entities", query, self._equal("type", query.type), rows.entity_of)

    async def relationships(self, query: ListQuery) -> Listed[Relationship]:
        where = self._equal("label", query.label)
        if query.entity_id is not None:
            where.append(("(from_id = ? OR to_id = ?)", [query.entity_id, query.entity_id]))
        return await self._page("relationships", query, where, rows.relationship_of)

    async def summaries(self, query: ListQuery) -> Listed[Summary]:
        return await self._page("summaries", query, self._equal("session_id", query.session_id), rows.summary_of)
