"""The services as one principal sees them: every read and write checked against its key.

Each class wraps one service of ``domain.services`` (and search, context, history, the feed) with
the same methods, so a route or an MCP tool calls it exactly as it calls the service. Each is a
subclass of the service it wraps, so it passes where that type is declared (Litestar checks a
dependency's type); it never runs the base's ``__init__``, so a method it does not override fails
loudly instead of reaching the store unchecked. A record of
another owner is ``NotFound`` (a bound key cannot tell it from an absent one); a write that would
create or change a record outside the key's owner is ``Forbidden`` naming the field. Lists and
searches are narrowed to the key's owner before they run, and what comes back is checked again
record by record, so no read path depends on a single filter being right.

``scoped(principal, services)`` answers the plain services for an unbound principal with every
scope (the bootstrap key, an open service): they pay nothing for access control.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from domain.access import READ, WRITE, Principal, may_change, may_forget, may_see, reading_owner, \
    require, writing_owner
from domain.changes import Event
from domain.context import ContextPackage, ContextService
from domain.errors import Forbidden, NotFound
from domain.feed import EventBatch, EventService, HistoryPage, HistoryService
from domain.limits import MAX_LIMIT
from domain.listing import CursorPage
from domain.models import (
    Entity, EntityChanges, Episode, EpisodeChanges, NewEntity, NewEpisode, NewRelationship, NewSummary, Owner, Page,
    Session, Summary, SummaryChanges,
)
from domain.retrieval import SearchQuery, SearchResult, SearchService
from domain.services import EntityService, EpisodeService, SessionService, SummaryService, UserService
from ports.entities import Direction


def _agent(record: Any) -> str | None:
    return getattr(record, "agent_id", None)


class _Scoped:
    def __init__(self, principal: Principal, inner: Any, sessions: SessionService) -> None:
        self._p = principal
        self._inner = inner
        self._sessions = sessions

    def _sees(self, record: Any) -> bool:
        return may_see(self._p, record.user_id, _agent(record))

    def _visible(self, record: Any, what: str, record_id: Any) -> Any:
        if not self._sees(record):
            raise NotFound(f"{what} {record_id} does not exist")
        return record

    def _changeable(self, record: Any, what: str, record_id: Any) -> Any:
        """``record`` when this key may change it: another owner's is absent to it (404), one it may
        read but not change (a global record, or no ``write`` scope) is ``Forbidden``."""
        if may_change(self._p, record.user_id, _agent(record), agents=hasattr(record, "agent_id")):
            return record
        self._visible(record, what, record_id)
        require(self._p, WRITE)
        raise Forbidden(f"this key may not change {what} {record_id}: it is not owned by the key's user",
                            field="userId")

    def _only_visible(self, items: Sequence[Any]) -> list[Any]:
        return [item for item in items if self._sees(item)]

    async def _session(self, session_id: int, *, change: bool = False) -> Session:
        session = await self._sessions.get(session_id)
        return self._changeable(session, "session", session_id) if change else \
            self._visible(session, "session", session_id)


class ScopedSessions(_Scoped, SessionService):
    async def create(self, external_id: str, metadata: Any, owner: Owner = Owner()) -> Session:
        return await self._inner.create(external_id, metadata, writing_owner(self._p, owner))

    async def get(self, session_id: int) -> Session:
        return await self._session(session_id)

    async def by_external_id(self, external_id: str) -> Session:
        return self._visible(await self._inner.by_external_id(external_id), "session", repr(external_id))

    async def list(self, limit: int, offset: int, owner: Owner = Owner()) -> Page[Session]:
        page = await self._inner.list(limit, offset, reading_owner(self._p, owner))
        return replace(page, items=self._only_visible(page.items))

    async def listed(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                     offset: int | None = None, owner: Owner = Owner()) -> CursorPage[Session]:
        page = await self._inner.listed(limit=limit, order=order, cursor=cursor, filter=filter, offset=offset,
                                        owner=reading_owner(self._p, owner))
        return replace(page, items=self._only_visible(page.items))

    async def update(self, session_id: int, metadata: Any) -> Session:
        await self._session(session_id, change=True)
        return await self._inner.update(session_id, metadata)

    async def delete(self, session_id: int) -> None:
        await self._session(session_id, change=True)
        await self._inner.delete(session_id)


class ScopedEpisodes(_Scoped, EpisodeService):
    async def add(self, new: NewEpisode) -> Episode:
        await self._session(new.session_id, change=True)
        return await self._inner.add(new)

    async def add_batch(self, batch: Sequence[NewEpisode]) -> list[Episode]:
        for session_id in dict.fromkeys(e.session_id for e in batch):
            await self._session(session_id, change=True)
        return await self._inner.add_batch(batch)

    async def get(self, episode_id: int) -> Episode:
        return self._visible(await self._inner.get(episode_id), "episode", episode_id)

    async def update(self, episode_id: int, changes: EpisodeChanges) -> Episode:
        self._changeable(await self._inner.get(episode_id), "episode", episode_id)
        return await self._inner.update(episode_id, changes)

    async def delete(self, episode_id: int) -> None:
        self._changeable(await self._inner.get(episode_id), "episode", episode_id)
        await self._inner.delete(episode_id)

    async def of_session(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        await self._session(session_id)
        return await self._inner.of_session(session_id, limit, offset)

    async def listed(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                     session_id: int | None = None, owner: Owner = Owner()) -> CursorPage[Episode]:
        page = await self._inner.listed(limit=limit, order=order, cursor=cursor, filter=filter, session_id=session_id,
                                        owner=reading_owner(self._p, owner))
        return replace(page, items=self._only_visible(page.items))

    async def search(self, q: str, limit: int, session_id: int | None = None, match: str = "all") -> list:
        require(self._p, READ)
        if session_id is not None:
            await self._session(session_id)
        # Narrowed in the index, so another user's many matches cannot crowd out this key's few. An
        # agent-bound key also sees its user's records of no agent, which the index's agent filter
        # would leave out: its hits are picked from a deeper list of the user's.
        owner = Owner(self._p.user_id) if self._p.bound else Owner()
        deeper = MAX_LIMIT if self._p.agent_id is not None and session_id is None else limit
        hits = await self._inner.search(q, max(limit, deeper), session_id, match, owner,
                                        global_records=self._p.global_read)
        return [hit for hit in hits if self._sees(hit.item)][:limit]


class ScopedEntities(_Scoped, EntityService):
    async def upsert(self, new: NewEntity):
        writing_owner(self._p, Owner(new.user_id), agents=False)
        return await self._inner.upsert(new)

    async def get(self, entity_id: int) -> Entity:
        return self._visible(await self._inner.get(entity_id), "entity", entity_id)

    async def update(self, entity_id: int, changes: EntityChanges) -> Entity:
        self._changeable(await self._inner.get(entity_id), "entity", entity_id)
        return await self._inner.update(entity_id, changes)

    async def delete(self, entity_id: int) -> None:
        self._changeable(await self._inner.get(entity_id), "entity", entity_id)
        await self._inner.delete(entity_id)

    def _list_owner(self, user_id: str | None) -> str | None:
        return reading_owner(self._p, Owner(user_id)).user_id

    async def listed(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                     type: str | None = None, user_id: str | None = None) -> CursorPage[Entity]:
        page = await self._inner.listed(limit=limit, order=order, cursor=cursor, filter=filter, type=type,
                                        user_id=self._list_owner(user_id))
        return replace(page, items=self._only_visible(page.items))

    async def listed_relationships(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                                   entity_id: int | None = None, label: str | None = None,
                                   user_id: str | None = None, as_of: str | None = None):
        if entity_id is not None:
            await self.get(entity_id)
        page = await self._inner.listed_relationships(limit=limit, order=order, cursor=cursor, filter=filter,
                                                      entity_id=entity_id, label=label,
                                                      user_id=self._list_owner(user_id), as_of=as_of)
        return replace(page, items=self._only_visible(page.items))

    async def by_type(self, entity_type: str, limit: int, offset: int) -> Page[Entity]:
        require(self._p, READ)
        # Narrowed in the store, so the page and its total count only what this key sees.
        page = await self._inner.by_type(entity_type, limit, offset, self._p.user_id, self._p.global_read)
        return replace(page, items=self._only_visible(page.items))

    async def find_by_name(self, name: str, limit: int) -> list[Entity]:
        require(self._p, READ)
        return self._only_visible(await self._inner.find_by_name(name, limit, self._p.user_id, self._p.global_read))

    async def relate(self, new: NewRelationship):
        writing_owner(self._p, Owner(new.user_id), agents=False)
        await self.get(new.from_id)
        await self.get(new.to_id)
        # The upsert touches only edges of the new edge's owner, which writing_owner made the key's.
        return await self._inner.relate(new)

    async def relationships(self, entity_id: int, direction: Direction = "out", as_of: str | None = None) -> list:
        await self.get(entity_id)
        return self._only_visible(await self._inner.relationships(entity_id, direction, as_of))

    async def unrelate(self, from_id: int, to_id: int, label: str, user_id: str | None = None) -> None:
        # A bound key deletes its own user's edges of the triple only (naming no owner means its own).
        owner = reading_owner(self._p, Owner(user_id)).user_id if self._p.bound else user_id
        await self.get(from_id)
        name = f"{from_id} -[{label}]-> {to_id}"
        visible = [e for e in await self._inner.relationships(from_id, "out")
                   if e.to_id == to_id and e.label == label and self._sees(e)]
        edges = [e for e in visible if owner is None or e.user_id == owner]
        for edge in edges or visible[:1]:  # none of its own but one it may read (a global one): 403
            self._changeable(edge, "relationship", name)
        if not edges:
            raise NotFound(f"relationship {name} does not exist")
        await self._inner.unrelate(from_id, to_id, label, owner)


class ScopedSummaries(_Scoped, SummaryService):
    async def add(self, new: NewSummary) -> Summary:
        await self._session(new.session_id, change=True)
        return await self._inner.add(new)

    async def get(self, summary_id: int) -> Summary:
        return self._visible(await self._inner.get(summary_id), "summary", summary_id)

    async def update(self, summary_id: int, changes: SummaryChanges) -> Summary:
        self._changeable(await self._inner.get(summary_id), "summary", summary_id)
        return await self._inner.update(summary_id, changes)

    async def delete(self, summary_id: int) -> None:
        self._changeable(await self._inner.get(summary_id), "summary", summary_id)
        await self._inner.delete(summary_id)

    async def listed(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                     session_id: int | None = None, owner: Owner = Owner()) -> CursorPage[Summary]:
        page = await self._inner.listed(limit=limit, order=order, cursor=cursor, filter=filter, session_id=session_id,
                                        owner=reading_owner(self._p, owner))
        return replace(page, items=self._only_visible(page.items))

    async def of_session(self, session_id: int) -> list[Summary]:
        await self._session(session_id)
        return await self._inner.of_session(session_id)


class ScopedUsers(_Scoped, UserService):
    async def forget(self, user_id: str) -> dict[str, int]:
        may_forget(self._p, user_id)
        return await self._inner.forget(user_id)


class ScopedSearch(_Scoped, SearchService):
    async def _checked_session(self, session_id: int | None) -> None:
        if session_id is not None:  # another owner's session is absent to this key, as everywhere
            await self._session(session_id)

    async def search(self, q: SearchQuery) -> SearchResult:
        owner = reading_owner(self._p, q.owner)
        await self._checked_session(q.session_id)
        result = await self._inner.search(replace(q, owner=owner))
        return replace(result, hits=[hit for hit in result.hits if self._sees(hit.item)])


class ScopedContext(_Scoped, ContextService):
    async def build(self, query: str, session_id: int | None, token_budget: int, recent_episodes: int = 5,
                    relevant_limit: int = 10, ranker: str | None = None, owner: Owner = Owner(),
                    as_of: str | None = None) -> ContextPackage:
        owner = reading_owner(self._p, owner)
        if session_id is not None:
            await self._session(session_id)
        package = await self._inner.build(query, session_id, token_budget, recent_episodes, relevant_limit, ranker,
                                          owner, as_of, global_records=self._p.global_read or not self._p.bound)
        sees = self._sees
        return replace(
            package, recent_episodes=[e for e in package.recent_episodes if sees(e)],
            relevant_episodes=[(e, s) for e, s in package.relevant_episodes if sees(e)],
            neighbour_episodes=[e for e in package.neighbour_episodes if sees(e)],
            summaries=[(m, s) for m, s in package.summaries if sees(m)],
            entities=[e for e in package.entities if sees(e)],
            relationships=[r for r in package.relationships if sees(r)])


class ScopedHistory(_Scoped, HistoryService):
    async def of_record(self, kind: str, record_id: int, after: int = 0, limit: int = 100) -> HistoryPage:
        require(self._p, READ)
        page = await self._inner.of_record(kind, record_id, after, limit)
        if not self._p.bound:
            return page
        # A version carries its record's owner (owners never change), so one hidden version hides all.
        if any(not may_see(self._p, v.user_id, _agent_of_version(v)) for v in page.items):
            return HistoryPage([], None)
        return page


def _agent_of_version(version: Any) -> str | None:
    image = version.before or version.after or {}
    return image.get("agent_id")


class ScopedEvents(_Scoped, EventService):
    def notify(self) -> None:
        self._inner.notify()

    async def after(self, after: int = 0, limit: int = 100, wait: float = 0) -> EventBatch:
        require(self._p, READ)
        batch = await self._inner.after(after, limit, wait)
        if not self._p.bound:
            return batch
        # Events carry a user id, not an agent: an agent-bound key sees its user's events (ids only).
        kept: list[Event] = [e for e in batch.events if may_see(self._p, e.user_id)]
        return replace(batch, events=kept)


@dataclass(frozen=True, slots=True)
class Services:
    """The services a request may call, as one principal sees them."""

    sessions: Any
    episodes: Any
    entities: Any
    summaries: Any
    users: Any
    search: Any
    context: Any
    history: Any
    events: Any


def scoped(principal: Principal, plain: Services) -> Services:
    """``plain`` as ``principal`` sees them; unchanged for a principal with every right."""
    if principal.unrestricted:
        return plain
    s = plain.sessions
    return Services(
        ScopedSessions(principal, s, s), ScopedEpisodes(principal, plain.episodes, s),
        ScopedEntities(principal, plain.entities, s), ScopedSummaries(principal, plain.summaries, s),
        ScopedUsers(principal, plain.users, s), ScopedSearch(principal, plain.search, s),
        ScopedContext(principal, plain.context, s), ScopedHistory(principal, plain.history, s),
        ScopedEvents(principal, plain.events, s))
