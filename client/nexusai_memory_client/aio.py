"""``AsyncMemoryClient``: the asyncio client, over ``httpx.AsyncClient``; the same methods as
``MemoryClient`` (sync.py), each awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx

from nexusai_memory_client import calls as c
from nexusai_memory_client.calls import Call, Direction, Match, Order, Source, T
from nexusai_memory_client.models import (
    ContextPackage, CursorPage, Entity, EntityPage, Episode, EpisodePage, EpisodeSearch, Events, Forgotten,
    History, Meta, NewEpisode, Ranker, Relationship, SearchResult, Session, SessionPage, Summary,
)
from nexusai_memory_client.retries import Retries, key_for

DEFAULT_TIMEOUT = 30.0


class AsyncMemoryClient:
    """Asyncio client; use it as an async context manager or call ``await aclose()``. Every method
    takes keyword arguments only and raises ``MemoryServiceError`` on any failure. A ready ``http``
    client (its own base URL, proxies, transport) replaces the default one."""

    def __init__(self, base_url: str = "http://127.0.0.1:3002", *, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, http: httpx.AsyncClient | None = None,
                 actor: str | None = None, retries: Retries = Retries(), idempotency_keys: bool = True) -> None:
        """``actor`` (sent as ``X-Actor``) names who makes this client's changes in record history.
        ``retries`` says how transient failures are retried (``NO_RETRIES``: never); with
        ``idempotency_keys`` every write carries a fresh ``Idempotency-Key``, so its retries are safe."""
        self._timeout = timeout
        self._retries = retries
        self._keys = idempotency_keys
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=c.headers(api_key, actor))

    async def send(self, call: Call[T], *, idempotency_key: str | None = None) -> T:
        """Send ``call``, retrying transient failures (``retries``); a write's every attempt carries
        the same key (``idempotency_key``, or a fresh one)."""
        key = key_for(call.method, call.read_only, idempotency_key, self._keys)
        args, safe, attempt = call.request_args(self._timeout, key), key is not None or call.safe_without_key, 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(call.method, call.path, **args)
            except httpx.HTTPError as exc:
                delay = self._retries.after_error(attempt, exc, safe=safe)
                if delay is None:
                    raise c.unreachable(exc) from exc
            else:
                delay = self._retries.after_response(attempt, response, safe=safe)
                if delay is None:
                    return c.decode(call, response)
            await asyncio.sleep(delay)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- sessions ---------------------------------------------------------------------------------
    async def create_session(self, *, external_id: str, metadata: Meta | None = None, user_id: str | None = None,
                       agent_id: str | None = None) -> Session:
        return await self.send(c.create_session(external_id=external_id, metadata=metadata, user_id=user_id,
                                              agent_id=agent_id))

    async def list_sessions(self, *, limit: int = 20, offset: int = 0, user_id: str | None = None,
                      agent_id: str | None = None) -> SessionPage:
        return await self.send(c.list_sessions(limit=limit, offset=offset, user_id=user_id, agent_id=agent_id))

    async def get_session(self, *, session_id: int) -> Session:
        return await self.send(c.get_session(session_id=session_id))

    async def session_by_external_id(self, *, external_id: str) -> Session:
        return await self.send(c.session_by_external_id(external_id=external_id))

    async def update_session(self, *, session_id: int, metadata: Meta) -> Session:
        return await self.send(c.update_session(session_id=session_id, metadata=metadata))

    async def delete_session(self, *, session_id: int) -> None:
        return await self.send(c.delete_session(session_id=session_id))

    async def session_episodes(self, *, session_id: int, limit: int = 20, offset: int = 0) -> EpisodePage:
        return await self.send(c.session_episodes(session_id=session_id, limit=limit, offset=offset))

    async def session_summaries(self, *, session_id: int) -> list[Summary]:
        return await self.send(c.session_summaries(session_id=session_id))

    # -- episodes ---------------------------------------------------------------------------------
    async def create_episode(self, *, session_id: int, user_message: str, ai_response: str, token_count: int | None = None,
                       metadata: Meta | None = None, created_at: datetime | None = None,
                       expires_at: datetime | None = None) -> Episode:
        return await self.send(c.create_episode(session_id=session_id, user_message=user_message, ai_response=ai_response,
                                          token_count=token_count, metadata=metadata, created_at=created_at,
                                          expires_at=expires_at))

    async def create_episodes(self, *, episodes: Sequence[NewEpisode]) -> list[Episode]:
        return await self.send(c.create_episodes(episodes=episodes))

    async def get_episode(self, *, episode_id: int) -> Episode:
        return await self.send(c.get_episode(episode_id=episode_id))

    async def update_episode(self, *, episode_id: int, user_message: str | None = None,
                             ai_response: str | None = None, token_count: int | None = None,
                             metadata: Meta | None = None) -> Episode:
        return await self.send(c.update_episode(
            episode_id=episode_id, user_message=user_message, ai_response=ai_response, token_count=token_count,
            metadata=metadata))

    async def delete_episode(self, *, episode_id: int) -> None:
        return await self.send(c.delete_episode(episode_id=episode_id))

    async def search_episodes(self, *, q: str, limit: int = 10, session_id: int | None = None,
                              match: Match = "all") -> EpisodeSearch:
        return await self.send(c.search_episodes(q=q, limit=limit, session_id=session_id, match=match))

    # -- entities and relationships ---------------------------------------------------------------
    async def upsert_entity(self, *, name: str, type: str, notes: str | None = None, metadata: Meta | None = None,
                      user_id: str | None = None, expires_at: datetime | None = None) -> Entity:
        """Unique by (user_id, name, type); without ``user_id`` the global entity, as before owners."""
        return await self.send(c.upsert_entity(name=name, type=type, notes=notes, metadata=metadata, user_id=user_id,
                                         expires_at=expires_at))

    async def get_entity(self, *, entity_id: int) -> Entity:
        return await self.send(c.get_entity(entity_id=entity_id))

    async def entities_by_type(self, *, type: str, limit: int = 100, offset: int = 0) -> EntityPage:
        return await self.send(c.entities_by_type(type=type, limit=limit, offset=offset))

    async def find_entities(self, *, name: str, limit: int = 20) -> list[Entity]:
        return await self.send(c.find_entities(name=name, limit=limit))

    async def delete_entity(self, *, entity_id: int) -> None:
        return await self.send(c.delete_entity(entity_id=entity_id))

    async def relationships(self, *, entity_id: int, direction: Direction = "out",
                            as_of: datetime | str | None = None) -> list[Relationship]:
        """All edges, or with ``as_of`` those valid at that moment."""
        return await self.send(c.relationships(entity_id=entity_id, direction=direction, as_of=as_of))

    async def upsert_relationship(self, *, from_id: int, to_id: int, label: str, metadata: Meta | None = None,
                                   user_id: str | None = None, valid_from: datetime | str | None = None,
                                   valid_to: datetime | str | None = None, supersedes: bool = False) -> Relationship:
        """``supersedes`` closes the other open edges of (from_id, label) with the same owner where this one begins."""
        return await self.send(c.upsert_relationship(from_id=from_id, to_id=to_id, label=label, metadata=metadata,
                                                     user_id=user_id, valid_from=valid_from, valid_to=valid_to,
                                                     supersedes=supersedes))

    # -- history and the change feed --------------------------------------------------------------
    async def history(self, *, kind: c.HistoryKind, record_id: int, after: int = 0, limit: int = 100) -> History:
        """A record's versions oldest first (also after it was deleted); page with ``after=next_after``."""
        return await self.send(c.history(kind=kind, record_id=record_id, after=after, limit=limit))

    async def events(self, *, after: int = 0, limit: int = 100, wait: float = 0) -> Events:
        """Changes after ``after``; ``wait`` seconds (up to 30) for one when there are none yet."""
        return await self.send(c.events(after=after, limit=limit, wait=wait))

    async def delete_relationship(self, *, from_id: int, to_id: int, label: str, user_id: str | None = None) -> None:
        """Deletes the triple's edges of ``user_id``, else of every owner (with a key bound to a
        user: its own)."""
        return await self.send(c.delete_relationship(from_id=from_id, to_id=to_id, label=label, user_id=user_id))

    # -- summaries --------------------------------------------------------------------------------
    async def create_summary(self, *, session_id: int, content: str, first_episode_id: int | None = None,
                       last_episode_id: int | None = None, episode_count: int | None = None,
                       token_count: int | None = None, metadata: Meta | None = None,
                       expires_at: datetime | None = None) -> Summary:
        return await self.send(c.create_summary(session_id=session_id, content=content, first_episode_id=first_episode_id,
                                          last_episode_id=last_episode_id, episode_count=episode_count,
                                          token_count=token_count, metadata=metadata, expires_at=expires_at))

    async def get_summary(self, *, summary_id: int) -> Summary:
        return await self.send(c.get_summary(summary_id=summary_id))

    async def delete_summary(self, *, summary_id: int) -> None:
        return await self.send(c.delete_summary(summary_id=summary_id))

    # -- keyset lists (``next_cursor`` in, ``cursor`` out) and partial updates ---------------------
    async def list_sessions_by_cursor(self, *, limit: int = 20, order: Order = "asc", cursor: str | None = None,
                                filter: Meta | None = None) -> CursorPage[Session]:
        return await self.send(c.list_sessions_by_cursor(limit=limit, order=order, cursor=cursor, filter=filter))

    async def list_episodes(self, *, session_id: int | None = None, limit: int = 20, order: Order = "asc",
                      cursor: str | None = None, filter: Meta | None = None) -> CursorPage[Episode]:
        return await self.send(c.list_episodes(session_id=session_id, limit=limit, order=order, cursor=cursor, filter=filter))

    async def list_entities(self, *, type: str | None = None, limit: int = 20, order: Order = "asc",
                      cursor: str | None = None, filter: Meta | None = None) -> CursorPage[Entity]:
        return await self.send(c.list_entities(type=type, limit=limit, order=order, cursor=cursor, filter=filter))

    async def list_relationships(self, *, entity_id: int | None = None, label: str | None = None, limit: int = 20,
                           order: Order = "asc", cursor: str | None = None,
                           filter: Meta | None = None) -> CursorPage[Relationship]:
        return await self.send(c.list_relationships(entity_id=entity_id, label=label, limit=limit, order=order, cursor=cursor,
                                          filter=filter))

    async def list_summaries(self, *, session_id: int | None = None, limit: int = 20, order: Order = "asc",
                       cursor: str | None = None, filter: Meta | None = None) -> CursorPage[Summary]:
        return await self.send(c.list_summaries(session_id=session_id, limit=limit, order=order, cursor=cursor, filter=filter))

    async def update_entity(self, *, entity_id: int, name: str | None = None, type: str | None = None,
                      notes: str | None = None, metadata: Meta | None = None) -> Entity:
        return await self.send(c.update_entity(entity_id=entity_id, name=name, type=type, notes=notes, metadata=metadata))

    async def update_summary(self, *, summary_id: int, content: str | None = None, first_episode_id: int | None = None,
                       last_episode_id: int | None = None, episode_count: int | None = None,
                       token_count: int | None = None, metadata: Meta | None = None) -> Summary:
        return await self.send(c.update_summary(summary_id=summary_id, content=content, first_episode_id=first_episode_id,
                                          last_episode_id=last_episode_id, episode_count=episode_count,
                                          token_count=token_count, metadata=metadata))

    # -- retrieval and operations -----------------------------------------------------------------
    async def search(self, *, query: str, limit: int = 10, session_id: int | None = None,
               sources: Sequence[Source] = ("episodes",), ranker: str | None = None, since: datetime | None = None,
               until: datetime | None = None, user_id: str | None = None, agent_id: str | None = None,
               metadata: Meta | None = None, min_score: float | None = None,
               read_your_writes: bool = True) -> SearchResult:
        """``user_id``/``agent_id``: every session of theirs; ``metadata``: the ``filter.metadata``
        conditions; ``min_score``: the lowest relevance kept, 0-1 (default: the ranker's floor; 0:
        every hit); ``read_your_writes``: embed the scope's waiting records before searching."""
        return await self.send(c.search(query=query, limit=limit, session_id=session_id, sources=sources, ranker=ranker,
                                  since=since, until=until, user_id=user_id, agent_id=agent_id, metadata=metadata,
                                  min_score=min_score, read_your_writes=read_your_writes))

    async def context(self, *, query: str, token_budget: int, session_id: int | None = None, recent_episodes: int = 5,
                relevant_limit: int = 10, ranker: str | None = None, user_id: str | None = None,
                agent_id: str | None = None, as_of: datetime | str | None = None) -> ContextPackage:
        return await self.send(c.context(query=query, session_id=session_id, token_budget=token_budget,
                                   recent_episodes=recent_episodes, relevant_limit=relevant_limit, ranker=ranker,
                                   user_id=user_id, agent_id=agent_id, as_of=as_of))

    async def forget_user(self, *, user_id: str) -> Forgotten:
        """Delete everything ``user_id`` owns; the counts per kind (zeros for an unknown user)."""
        return await self.send(c.forget_user(user_id=user_id))

    async def rankers(self) -> list[Ranker]:
        return await self.send(c.rankers())

    async def health(self) -> dict[str, Any]:
        return await self.send(c.health())

    async def metrics(self) -> str:
        return await self.send(c.metrics())
