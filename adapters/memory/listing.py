"""Keyset lists in memory: the reference reading of ``ports.listing`` (filter, sort, cut)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from adapters.memory.state import MemoryState
from domain.listing import Listed, ListQuery, page_from
from domain.models import Entity, Episode, Relationship, Session, Summary


def _page(records: Iterable, query: ListQuery, wanted: Callable[[object], bool] = lambda _: True) -> Listed:
    found = [r for r in records if wanted(r) and query.metadata.matches(r.metadata) and query.follows(r.created_at, r.id)]
    found.sort(key=lambda r: (r.created_at, r.id), reverse=query.order == "desc")
    return page_from(found[:query.limit + 1], query.limit)


class MemoryListing:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def sessions(self, query: ListQuery) -> Listed[Session]:
        return _page(list(self._s.sessions.values()), query)

    async def episodes(self, query: ListQuery) -> Listed[Episode]:
        return _page(list(self._s.episodes.values()), query,
                     lambda e: query.session_id is None or e.session_id == query.session_id)

    async def entities(self, query: ListQuery) -> Listed[Entity]:
        return _page(list(self._s.entities.values()), query, lambda e: query.type is None or e.type == query.type)

    async def relationships(self, query: ListQuery) -> Listed[Relationship]:
        return _page(list(self._s.relationships.values()), query,
                     lambda r: (query.label is None or r.label == query.label)
                     and (query.entity_id is None or query.entity_id in (r.from_id, r.to_id)))

    async def summaries(self, query: ListQuery) -> Listed[Summary]:
        return _page(list(self._s.summaries.values()), query,
                     lambda s: query.session_id is None or s.session_id == query.session_id)
