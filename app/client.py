"""A typed Python client for the memory service, sync (``MemoryClient``) and async
(``AsyncMemoryClient``), decoding into the same msgspec Structs the server answers with.

    with MemoryClient("http://127.0.0.1:3002", api_key="...") as memory:
        session = memory.create_session("conv-42")
        memory.create_episode(session.id, "I moved to Lisbon", "Noted: Lisbon.")
        hits = memory.search("where do I live?", session_id=session.id).hits

Each route is described once, by a request builder in ``Requests`` (method, path, query, body,
response type); both clients send that description with their own httpx client and decode the
answer with the same ``decode``. So the client methods are one line each and the two cannot drift.
An error body becomes ``MemoryServiceError(status, code, message, field)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from app.schemas import (
    ContextOut, ContextRequest, CreateEpisode, CreateSession, CreateSummary, DeleteRelationship, EntityOut,
    EntityPage, EpisodeBatch, EpisodeOut, EpisodePage, EpisodeSearchOut, RankerOut, RelationshipOut, SearchOut,
    SearchRequest, SessionOut, SessionPage, SummaryOut, UpdateEpisode, UpdateSession, UpsertEntity,
    UpsertRelationship,
)

T = TypeVar("T")
Meta = dict[str, Any]
Source = Literal["episodes", "entities", "summaries"]
DEFAULT_TIMEOUT = 30.0


class MemoryServiceError(Exception):
    """The service answered with an error: ``status`` (HTTP), ``code`` (machine-readable, e.g.
    ``not_found``), ``message`` (for humans) and ``field`` (the offending field, when known)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class _ErrorBody(msgspec.Struct):
    code: str = "http_error"
    message: str = ""
    field: str | None = None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to send and the type its success body decodes into (``None``: no body)."""

    method: str
    path: str
    response: Any
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None


def decode(call: Call[T], response: httpx.Response) -> T:
    """The decoded body of a 2xx answer, or ``MemoryServiceError`` for anything else."""
    if response.status_code >= 400:
        try:
            error = msgspec.json.decode(response.content, type=_ErrorBody)
        except (msgspec.DecodeError, msgspec.ValidationError):
            error = _ErrorBody(message=response.text[:500] or response.reason_phrase)
        raise MemoryServiceError(response.status_code, error.code, error.message or response.reason_phrase,
                                 error.field)
    if call.response is None:
        return None  # type: ignore[return-value]
    if call.response is str:
        return response.text  # type: ignore[return-value]
    return msgspec.json.decode(response.content, type=call.response)


def _request_args(call: Call) -> dict[str, Any]:
    args: dict[str, Any] = {"params": {k: v for k, v in call.params.items() if v is not None}}
    if call.body is not None:
        args["content"] = msgspec.json.encode(call.body)
        args["headers"] = {"content-type": "application/json"}
    return args


def _headers(api_key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


def _segment(value: str) -> str:
    return quote(value, safe="")


class Requests:
    """The request builders: one per route, shared by both clients."""

    # -- sessions ---------------------------------------------------------------------------------
    @staticmethod
    def create_session(external_id: str, metadata: Meta | None) -> Call[SessionOut]:
        return Call("POST", "/sessions", SessionOut, body=CreateSession(external_id=external_id, metadata=metadata or {}))

    @staticmethod
    def list_sessions(limit: int, offset: int) -> Call[SessionPage]:
        return Call("GET", "/sessions", SessionPage, {"limit": limit, "offset": offset})

    @staticmethod
    def get_session(session_id: int) -> Call[SessionOut]:
        return Call("GET", f"/sessions/{int(session_id)}", SessionOut)

    @staticmethod
    def session_by_external_id(external_id: str) -> Call[SessionOut]:
        return Call("GET", f"/sessions/by-external/{_segment(external_id)}", SessionOut)

    @staticmethod
    def update_session(session_id: int, metadata: Meta) -> Call[SessionOut]:
        return Call("PATCH", f"/sessions/{int(session_id)}", SessionOut, body=UpdateSession(metadata=metadata))

    @staticmethod
    def delete_session(session_id: int) -> Call[None]:
        return Call("DELETE", f"/sessions/{int(session_id)}", None)

    @staticmethod
    def session_episodes(session_id: int, limit: int, offset: int) -> Call[EpisodePage]:
        return Call("GET", f"/sessions/{int(session_id)}/episodes", EpisodePage, {"limit": limit, "offset": offset})

    @staticmethod
    def session_summaries(session_id: int) -> Call[list[SummaryOut]]:
        return Call("GET", f"/sessions/{int(session_id)}/summaries", list[SummaryOut])

    # -- episodes ---------------------------------------------------------------------------------
    @staticmethod
    def create_episode(episode: CreateEpisode) -> Call[EpisodeOut]:
        return Call("POST", "/episodes", EpisodeOut, body=episode)

    @staticmethod
    def create_episodes(episodes: Sequence[CreateEpisode]) -> Call[list[EpisodeOut]]:
        return Call("POST", "/episodes/batch", list[EpisodeOut], body=EpisodeBatch(episodes=list(episodes)))

    @staticmethod
    def get_episode(episode_id: int) -> Call[EpisodeOut]:
        return Call("GET", f"/episodes/{int(episode_id)}", EpisodeOut)

    @staticmethod
    def update_episode(episode_id: int, changes: UpdateEpisode) -> Call[EpisodeOut]:
        return Call("PATCH", f"/episodes/{int(episode_id)}", EpisodeOut, body=changes)

    @staticmethod
    def delete_episode(episode_id: int) -> Call[None]:
        return Call("DELETE", f"/episodes/{int(episode_id)}", None)

    @staticmethod
    def search_episodes(q: str, limit: int, session_id: int | None, match: str) -> Call[EpisodeSearchOut]:
        return Call("GET", "/episodes/search", EpisodeSearchOut,
                    {"q": q, "limit": limit, "sessionId": session_id, "match": match})

    # -- entities and relationships ---------------------------------------------------------------
    @staticmethod
    def upsert_entity(entity: UpsertEntity) -> Call[EntityOut]:
        return Call("POST", "/entities", EntityOut, body=entity)

    @staticmethod
    def get_entity(entity_id: int) -> Call[EntityOut]:
        return Call("GET", f"/entities/{int(entity_id)}", EntityOut)

    @staticmethod
    def entities_by_type(entity_type: str, limit: int, offset: int) -> Call[EntityPage]:
        return Call("GET", f"/entities/by-type/{_segment(entity_type)}", EntityPage, {"limit": limit, "offset": offset})

    @staticmethod
    def find_entities(name: str, limit: int) -> Call[list[EntityOut]]:
        return Call("GET", "/entities/search", list[EntityOut], {"name": name, "limit": limit})

    @staticmethod
    def delete_entity(entity_id: int) -> Call[None]:
        return Call("DELETE", f"/entities/{int(entity_id)}", None)

    @staticmethod
    def relationships(entity_id: int, direction: str) -> Call[list[RelationshipOut]]:
        return Call("GET", f"/entities/{int(entity_id)}/relationships", list[RelationshipOut], {"direction": direction})

    @staticmethod
    def upsert_relationship(relationship: UpsertRelationship) -> Call[RelationshipOut]:
        return Call("POST", "/relationships", RelationshipOut, body=relationship)

    @staticmethod
    def delete_relationship(from_id: int, to_id: int, label: str) -> Call[None]:
        return Call("DELETE", "/relationships", None, body=DeleteRelationship(from_id=from_id, to_id=to_id, label=label))

    # -- summaries --------------------------------------------------------------------------------
    @staticmethod
    def create_summary(summary: CreateSummary) -> Call[SummaryOut]:
        return Call("POST", "/summaries", SummaryOut, body=summary)

    @staticmethod
    def get_summary(summary_id: int) -> Call[SummaryOut]:
        return Call("GET", f"/summaries/{int(summary_id)}", SummaryOut)

    @staticmethod
    def delete_summary(summary_id: int) -> Call[None]:
        return Call("DELETE", f"/summaries/{int(summary_id)}", None)

    # -- retrieval and operations -----------------------------------------------------------------
    @staticmethod
    def search(request: SearchRequest) -> Call[SearchOut]:
        return Call("POST", "/search", SearchOut, body=request)

    @staticmethod
    def context(request: ContextRequest) -> Call[ContextOut]:
        return Call("POST", "/context", ContextOut, body=request)

    @staticmethod
    def rankers() -> Call[list[RankerOut]]:
        return Call("GET", "/rankers", list[RankerOut])

    @staticmethod
    def health() -> Call[dict[str, Any]]:
        return Call("GET", "/health", dict[str, Any])

    @staticmethod
    def metrics() -> Call[str]:
        return Call("GET", "/metrics", str)


R = Requests


def _episode(session_id: int, user_message: str, ai_response: str, token_count: int | None, metadata: Meta | None,
             created_at: datetime | None) -> CreateEpisode:
    return CreateEpisode(session_id=session_id, user_message=user_message, ai_response=ai_response,
                         token_count=token_count, metadata=metadata or {}, created_at=created_at)


def _search(query: str, limit: int, session_id: int | None, sources: Sequence[Source], ranker: str | None,
            since: datetime | None, until: datetime | None) -> SearchRequest:
    return SearchRequest(query=query, limit=limit, session_id=session_id, sources=list(sources), ranker=ranker,
                         since=since, until=until)


def _context(query: str, session_id: int, token_budget: int, recent_episodes: int, relevant_limit: int,
             ranker: str | None) -> ContextRequest:
    return ContextRequest(query=query, session_id=session_id, token_budget=token_budget,
                          recent_episodes=recent_episodes, relevant_limit=relevant_limit, ranker=ranker)


class MemoryClient:
    """Blocking client over ``httpx.Client``; use as a context manager or call ``close()``.
    A ready ``http`` client (its own base URL, proxies, transport) replaces the default one."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 http: httpx.Client | None = None) -> None:
        self._http = http or httpx.Client(base_url=base_url, timeout=timeout, headers=_headers(api_key))

    def send(self, call: Call[T]) -> T:
        return decode(call, self._http.request(call.method, call.path, **_request_args(call)))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def create_session(self, external_id: str, metadata: Meta | None = None) -> SessionOut:
        return self.send(R.create_session(external_id, metadata))

    def list_sessions(self, limit: int = 20, offset: int = 0) -> SessionPage:
        return self.send(R.list_sessions(limit, offset))

    def get_session(self, session_id: int) -> SessionOut:
        return self.send(R.get_session(session_id))

    def session_by_external_id(self, external_id: str) -> SessionOut:
        return self.send(R.session_by_external_id(external_id))

    def update_session(self, session_id: int, metadata: Meta) -> SessionOut:
        return self.send(R.update_session(session_id, metadata))

    def delete_session(self, session_id: int) -> None:
        return self.send(R.delete_session(session_id))

    def session_episodes(self, session_id: int, limit: int = 20, offset: int = 0) -> EpisodePage:
        return self.send(R.session_episodes(session_id, limit, offset))

    def session_summaries(self, session_id: int) -> list[SummaryOut]:
        return self.send(R.session_summaries(session_id))

    def create_episode(self, session_id: int, user_message: str, ai_response: str, token_count: int | None = None,
                       metadata: Meta | None = None, created_at: datetime | None = None) -> EpisodeOut:
        return self.send(R.create_episode(_episode(session_id, user_message, ai_response, token_count, metadata,
                                                   created_at)))

    def create_episodes(self, episodes: Sequence[CreateEpisode]) -> list[EpisodeOut]:
        return self.send(R.create_episodes(episodes))

    def get_episode(self, episode_id: int) -> EpisodeOut:
        return self.send(R.get_episode(episode_id))

    def update_episode(self, episode_id: int, user_message: str | None = None, ai_response: str | None = None,
                       token_count: int | None = None, metadata: Meta | None = None) -> EpisodeOut:
        return self.send(R.update_episode(episode_id, UpdateEpisode(user_message=user_message, ai_response=ai_response,
                                                                    token_count=token_count, metadata=metadata)))

    def delete_episode(self, episode_id: int) -> None:
        return self.send(R.delete_episode(episode_id))

    def search_episodes(self, q: str, limit: int = 10, session_id: int | None = None,
                        match: Literal["all", "any", "fts"] = "all") -> EpisodeSearchOut:
        return self.send(R.search_episodes(q, limit, session_id, match))

    def upsert_entity(self, name: str, type: str, notes: str | None = None, metadata: Meta | None = None) -> EntityOut:
        return self.send(R.upsert_entity(UpsertEntity(name=name, type=type, notes=notes, metadata=metadata or {})))

    def get_entity(self, entity_id: int) -> EntityOut:
        return self.send(R.get_entity(entity_id))

    def entities_by_type(self, entity_type: str, limit: int = 100, offset: int = 0) -> EntityPage:
        return self.send(R.entities_by_type(entity_type, limit, offset))

    def find_entities(self, name: str, limit: int = 20) -> list[EntityOut]:
        return self.send(R.find_entities(name, limit))

    def delete_entity(self, entity_id: int) -> None:
        return self.send(R.delete_entity(entity_id))

    def relationships(self, entity_id: int, direction: Literal["out", "in", "both"] = "out") -> list[RelationshipOut]:
        return self.send(R.relationships(entity_id, direction))

    def upsert_relationship(self, from_id: int, to_id: int, label: str, metadata: Meta | None = None) -> RelationshipOut:
        return self.send(R.upsert_relationship(UpsertRelationship(from_id=from_id, to_id=to_id, label=label,
                                                                  metadata=metadata or {})))

    def delete_relationship(self, from_id: int, to_id: int, label: str) -> None:
        return self.send(R.delete_relationship(from_id, to_id, label))

    def create_summary(self, summary: CreateSummary) -> SummaryOut:
        return self.send(R.create_summary(summary))

    def get_summary(self, summary_id: int) -> SummaryOut:
        return self.send(R.get_summary(summary_id))

    def delete_summary(self, summary_id: int) -> None:
        return self.send(R.delete_summary(summary_id))

    def search(self, query: str, limit: int = 10, session_id: int | None = None,
               sources: Sequence[Source] = ("episodes",), ranker: str | None = None, since: datetime | None = None,
               until: datetime | None = None) -> SearchOut:
        return self.send(R.search(_search(query, limit, session_id, sources, ranker, since, until)))

    def context(self, query: str, session_id: int, token_budget: int, recent_episodes: int = 5,
                relevant_limit: int = 10, ranker: str | None = None) -> ContextOut:
        return self.send(R.context(_context(query, session_id, token_budget, recent_episodes, relevant_limit, ranker)))

    def rankers(self) -> list[RankerOut]:
        return self.send(R.rankers())

    def health(self) -> dict[str, Any]:
        return self.send(R.health())

    def metrics(self) -> str:
        return self.send(R.metrics())


class AsyncMemoryClient:
    """The same API as ``MemoryClient``, every method awaitable, over ``httpx.AsyncClient``."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 http: httpx.AsyncClient | None = None) -> None:
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=_headers(api_key))

    async def send(self, call: Call[T]) -> T:
        return decode(call, await self._http.request(call.method, call.path, **_request_args(call)))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def create_session(self, external_id: str, metadata: Meta | None = None) -> SessionOut:
        return await self.send(R.create_session(external_id, metadata))

    async def list_sessions(self, limit: int = 20, offset: int = 0) -> SessionPage:
        return await self.send(R.list_sessions(limit, offset))

    async def get_session(self, session_id: int) -> SessionOut:
        return await self.send(R.get_session(session_id))

    async def session_by_external_id(self, external_id: str) -> SessionOut:
        return await self.send(R.session_by_external_id(external_id))

    async def update_session(self, session_id: int, metadata: Meta) -> SessionOut:
        return await self.send(R.update_session(session_id, metadata))

    async def delete_session(self, session_id: int) -> None:
        return await self.send(R.delete_session(session_id))

    async def session_episodes(self, session_id: int, limit: int = 20, offset: int = 0) -> EpisodePage:
        return await self.send(R.session_episodes(session_id, limit, offset))

    async def session_summaries(self, session_id: int) -> list[SummaryOut]:
        return await self.send(R.session_summaries(session_id))

    async def create_episode(self, session_id: int, user_message: str, ai_response: str,
                             token_count: int | None = None, metadata: Meta | None = None,
                             created_at: datetime | None = None) -> EpisodeOut:
        return await self.send(R.create_episode(_episode(session_id, user_message, ai_response, token_count, metadata,
                                                         created_at)))

    async def create_episodes(self, episodes: Sequence[CreateEpisode]) -> list[EpisodeOut]:
        return await self.send(R.create_episodes(episodes))

    async def get_episode(self, episode_id: int) -> EpisodeOut:
        return await self.send(R.get_episode(episode_id))

    async def update_episode(self, episode_id: int, user_message: str | None = None, ai_response: str | None = None,
                             token_count: int | None = None, metadata: Meta | None = None) -> EpisodeOut:
        return await self.send(R.update_episode(episode_id, UpdateEpisode(
            user_message=user_message, ai_response=ai_response, token_count=token_count, metadata=metadata)))

    async def delete_episode(self, episode_id: int) -> None:
        return await self.send(R.delete_episode(episode_id))

    async def search_episodes(self, q: str, limit: int = 10, session_id: int | None = None,
                              match: Literal["all", "any", "fts"] = "all") -> EpisodeSearchOut:
        return await self.send(R.search_episodes(q, limit, session_id, match))

    async def upsert_entity(self, name: str, type: str, notes: str | None = None,
                            metadata: Meta | None = None) -> EntityOut:
        return await self.send(R.upsert_entity(UpsertEntity(name=name, type=type, notes=notes,
                                                            metadata=metadata or {})))

    async def get_entity(self, entity_id: int) -> EntityOut:
        return await self.send(R.get_entity(entity_id))

    async def entities_by_type(self, entity_type: str, limit: int = 100, offset: int = 0) -> EntityPage:
        return await self.send(R.entities_by_type(entity_type, limit, offset))

    async def find_entities(self, name: str, limit: int = 20) -> list[EntityOut]:
        return await self.send(R.find_entities(name, limit))

    async def delete_entity(self, entity_id: int) -> None:
        return await self.send(R.delete_entity(entity_id))

    async def relationships(self, entity_id: int,
                            direction: Literal["out", "in", "both"] = "out") -> list[RelationshipOut]:
        return await self.send(R.relationships(entity_id, direction))

    async def upsert_relationship(self, from_id: int, to_id: int, label: str,
                                  metadata: Meta | None = None) -> RelationshipOut:
        return await self.send(R.upsert_relationship(UpsertRelationship(from_id=from_id, to_id=to_id, label=label,
                                                                        metadata=metadata or {})))

    async def delete_relationship(self, from_id: int, to_id: int, label: str) -> None:
        return await self.send(R.delete_relationship(from_id, to_id, label))

    async def create_summary(self, summary: CreateSummary) -> SummaryOut:
        return await self.send(R.create_summary(summary))

    async def get_summary(self, summary_id: int) -> SummaryOut:
        return await self.send(R.get_summary(summary_id))

    async def delete_summary(self, summary_id: int) -> None:
        return await self.send(R.delete_summary(summary_id))

    async def search(self, query: str, limit: int = 10, session_id: int | None = None,
                     sources: Sequence[Source] = ("episodes",), ranker: str | None = None,
                     since: datetime | None = None, until: datetime | None = None) -> SearchOut:
        return await self.send(R.search(_search(query, limit, session_id, sources, ranker, since, until)))

    async def context(self, query: str, session_id: int, token_budget: int, recent_episodes: int = 5,
                      relevant_limit: int = 10, ranker: str | None = None) -> ContextOut:
        return await self.send(R.context(_context(query, session_id, token_budget, recent_episodes, relevant_limit,
                                                  ranker)))

    async def rankers(self) -> list[RankerOut]:
        return await self.send(R.rankers())

    async def health(self) -> dict[str, Any]:
        return await self.send(R.health())

    async def metrics(self) -> str:
        return await self.send(R.metrics())
