"""Keyset lists in memory: the reference reading of ``ports.listing`` (filter, sort, cut)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from adapters.memory.state import MemoryState, live
from domain.listing import Listed, ListQuery, page_from
from domain.models import Entity, Episode, Relationship, Session, Summary


def _page(records: Iterable, query: ListQuery, wanted: Callable[[object], bool], *fields: str) -> Listed:
    """``fields``: the query's equality filters, each named as the record's attribute."""
    def kept(r) -> bool:
        return (wanted(r) and live(r) and all(getattr(query, f) is None or getattr(r, f) == getattr(query, f)
                                               for f in fields)
                and query.metadata.matches(r.metadata) and query.follows(r.created_at, r.id))

    found = [r for r in records if kept(r)]
    found.sort(key=lambda r: (r.created_at, r.id), reverse=query.order == "desc")
    return page_from(found[:query.limit + 1], query.limit)


def _all(_) -> bool:
    return True


class MemoryListing:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def sessions(self, query: ListQuery) -> Listed[Session]:
        return _page(list(self._s.sessions.values()), query, _all, "user_id", "agent_id")

    async def episodes(self, query: ListQuery) -> Listed[Episode]:
        return _page(list(self._s.episodes.values()), query, _all, "session_id", "user_id", "agent_id")

    async def entities(self, query: ListQuery) -> Listed[Entity]:
        return _page(list(self._s.entities.values()), query, _all, "type", "user_id")

    async def relationships(self, query: ListQuery) -> Listed[Relationship]:
        return _page(list(self._s.relationships.values()), query,
                     lambda r: (query.entity_id is None or query.entity_id in (r.from_id, r.to_id))
                     and (query.as_of is None or r.valid_at(query.as_of)), "label", "user_id")

    async def summaries(self, query: ListQuery) -> Listed[Summary]:
        return _page(list(self._s.summaries.values()), query, _all, "session_id", "user_id", "agent_id")
