"""Each route described once: a request builder returns a ``Call`` (method, path, query, body and
the type the answer decodes into). Both clients send the same ``Call`` with their own httpx client
and decode the answer with the same ``decode``, so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from nexusai_memory_client.models import (
    ContextPackage, CursorPage, Entity, EntityPage, Episode, EpisodePage, EpisodeSearch, Events, Forgotten,
    History, Meta, NewEpisode, Ranker, Relationship, SearchResult, Session, SessionPage, Summary,
)

T = TypeVar("T")
Source = Literal["episodes", "entities", "summaries"]
Match = Literal["all", "any", "fts"]
Direction = Literal["out", "in", "both"]
Order = Literal["asc", "desc"]


class MemoryServiceError(Exception):
    """Every failure of a call: the service's error answer, or no answer at all.

    ``status`` is the HTTP status (0 when the service could not be reached), ``code`` the
    machine-readable code (``not_found``, ``validation_error``, ... or ``unreachable``),
    ``message`` the text for humans, ``field`` the offending field when the service names one, and
    ``body`` the whole decoded error body (or the raw text when it was not JSON)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None, body: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.body = body


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to send and the type its success body decodes into (``None``: no body)."""

    method: str
    path: str
    response: Any
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    wait: float = 0  # seconds the service may hold the answer (a long-poll): added to the timeout
    read_only: bool = False  # a POST that only reads (search, context): no idempotency key needed

    def request_args(self, timeout: float | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
        args: dict[str, Any] = {"params": {k: v for k, v in self.params.items() if v is not None}}
        if self.wait and timeout is not None:
            args["timeout"] = timeout + self.wait
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        if self.body is not None:
            args["content"] = msgspec.json.encode(self.body)
            headers["content-type"] = "application/json"
        if headers:
            args["headers"] = headers
        return args

    @property
    def safe_without_key(self) -> bool:
        """Whether repeating the call can never write twice, key or not."""
        return self.method in ("GET", "HEAD") or self.read_only


def decode(call: Call[T], response: httpx.Response) -> T:
    """The decoded body of a 2xx answer; ``MemoryServiceError`` for anything else."""
    if response.status_code >= 400:
        try:
            body = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            body = response.text
        error = body if isinstance(body, dict) else {}
        raise MemoryServiceError(
            response.status_code, str(error.get("code") or "http_error"),
            str(error.get("message") or response.text[:500] or response.reason_phrase), error.get("field"), body,
        )
    if call.response is None:
        return None  # type: ignore[return-value]
    if call.response is str:
        return response.text  # type: ignore[return-value]
    return msgspec.json.decode(response.content, type=call.response)


def unreachable(exc: httpx.HTTPError) -> MemoryServiceError:
    return MemoryServiceError(0, "unreachable", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def headers(api_key: str | None, actor: str | None = None) -> dict[str, str]:
    """The headers of every request: the key, and ``X-Actor`` (who makes the changes, in history)."""
    out = {"authorization": f"Bearer {api_key}"} if api_key else {}
    if actor:
        out["x-actor"] = actor
    return out


def _body(**fields: Any) -> dict[str, Any]:
    """A JSON body in the service's camelCase, leaving out what the caller did not give."""
    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(part.title() for part in rest)

    return {camel(k): v for k, v in fields.items() if v is not None}


def _segment(value: str) -> str:
    return quote(value, safe="")


def _id(value: int) -> int:
    return int(value)


def _list(path: str, item: type, *, limit: int, order: Order, cursor: str | None, filter: Meta | None,
          **params: Any) -> Call[Any]:
    """A keyset list call: ``filter`` is ``{"metadata": {...}}``, sent as JSON text."""
    query = {"limit": limit, "order": order, "cursor": cursor,
             "filter": None if filter is None else msgspec.json.encode(filter).decode(), **params}
    return Call("GET", path, CursorPage[item], query)  # type: ignore[valid-type]


def list_sessions_by_cursor(*, limit: int, order: Order, cursor: str | None, filter: Meta | None) -> Call[CursorPage[Session]]:
    return _list("/sessions", Session, limit=limit, order=order, cursor=cursor, filter=filter)


def list_episodes(*, session_id: int | None, limit: int, order: Order, cursor: str | None,
                  filter: Meta | None) -> Call[CursorPage[Episode]]:
    return _list("/episodes", Episode, limit=limit, order=order, cursor=cursor, filter=filter, sessionId=session_id)


def list_entities(*, type: str | None, limit: int, order: Order, cursor: str | None,
                  filter: Meta | None) -> Call[CursorPage[Entity]]:
    return _list("/entities", Entity, limit=limit, order=order, cursor=cursor, filter=filter, type=type)


def list_relationships(*, entity_id: int | None, label: str | None, limit: int, order: Order, cursor: str | None,
                       filter: Meta | None) -> Call[CursorPage[Relationship]]:
    return _list("/relationships", Relationship, limit=limit, order=order, cursor=cursor, filter=filter,
                 entityId=entity_id, label=label)


def list_summaries(*, session_id: int | None, limit: int, order: Order, cursor: str | None,
                   filter: Meta | None) -> Call[CursorPage[Summary]]:
    return _list("/summaries", Summary, limit=limit, order=order, cursor=cursor, filter=filter, sessionId=session_id)


def update_entity(*, entity_id: int, name: str | None, type: str | None, notes: str | None,
                  metadata: Meta | None) -> Call[Entity]:
    return Call("PATCH", f"/entities/{_id(entity_id)}", Entity,
                body=_body(name=name, type=type, notes=notes, metadata=metadata))


def update_summary(*, summary_id: int, content: str | None, first_episode_id: int | None, last_episode_id: int | None,
                   episode_count: int | None, token_count: int | None, metadata: Meta | None) -> Call[Summary]:
    return Call("PATCH", f"/summaries/{_id(summary_id)}", Summary, body=_body(
        content=content, first_episode_id=first_episode_id, last_episode_id=last_episode_id,
        episode_count=episode_count, token_count=token_count, metadata=metadata))


# -- sessions -------------------------------------------------------------------------------------
def create_session(*, external_id: str, metadata: Meta | None, user_id: str | None = None,
                   agent_id: str | None = None) -> Call[Session]:
    return Call("POST", "/sessions", Session, body=_body(external_id=external_id, metadata=metadata, user_id=user_id,
                                                         agent_id=agent_id))


def list_sessions(*, limit: int, offset: int, user_id: str | None = None, agent_id: str | None = None) -> Call[SessionPage]:
    return Call("GET", "/sessions", SessionPage, {"limit": limit, "offset": offset, "userId": user_id,
                                                  "agentId": agent_id})


def get_session(*, session_id: int) -> Call[Session]:
    return Call("GET", f"/sessions/{_id(session_id)}", Session)


def session_by_external_id(*, external_id: str) -> Call[Session]:
    if external_id.startswith("/") or external_id.endswith("/"):
        # Only the query form reaches these (a path segment loses a leading or trailing "/").
        return Call("GET", "/sessions/by-external", Session, {"externalId": external_id})
    return Call("GET", f"/sessions/by-external/{_segment(external_id)}", Session)


def update_session(*, session_id: int, metadata: Meta) -> Call[Session]:
    return Call("PATCH", f"/sessions/{_id(session_id)}", Session, body={"metadata": metadata})


def delete_session(*, session_id: int) -> Call[None]:
    return Call("DELETE", f"/sessions/{_id(session_id)}", None)


def session_episodes(*, session_id: int, limit: int, offset: int) -> Call[EpisodePage]:
    return Call("GET", f"/sessions/{_id(session_id)}/episodes", EpisodePage, {"limit": limit, "offset": offset})


def session_summaries(*, session_id: int) -> Call[list[Summary]]:
    return Call("GET", f"/sessions/{_id(session_id)}/summaries", list[Summary])


# -- episodes -------------------------------------------------------------------------------------
def create_episode(*, session_id: int, user_message: str, ai_response: str, token_count: int | None,
                   metadata: Meta | None, created_at: datetime | None,
                   expires_at: datetime | None = None) -> Call[Episode]:
    return Call("POST", "/episodes", Episode, body=_body(
        session_id=session_id, user_message=user_message, ai_response=ai_response, token_count=token_count,
        metadata=metadata, created_at=created_at, expires_at=expires_at))


def create_episodes(*, episodes: Sequence[NewEpisode]) -> Call[list[Episode]]:
    return Call("POST", "/episodes/batch", list[Episode], body={"episodes": list(episodes)})


def get_episode(*, episode_id: int) -> Call[Episode]:
    return Call("GET", f"/episodes/{_id(episode_id)}", Episode)


def update_episode(*, episode_id: int, user_message: str | None, ai_response: str | None, token_count: int | None,
                   metadata: Meta | None) -> Call[Episode]:
    return Call("PATCH", f"/episodes/{_id(episode_id)}", Episode, body=_body(
        user_message=user_message, ai_response=ai_response, token_count=token_count, metadata=metadata))


def delete_episode(*, episode_id: int) -> Call[None]:
    return Call("DELETE", f"/episodes/{_id(episode_id)}", None)


def search_episodes(*, q: str, limit: int, session_id: int | None, match: Match) -> Call[EpisodeSearch]:
    return Call("GET", "/episodes/search", EpisodeSearch,
                {"q": q, "limit": limit, "sessionId": session_id, "match": match})


# -- entities and relationships -------------------------------------------------------------------
def upsert_entity(*, name: str, type: str, notes: str | None, metadata: Meta | None, user_id: str | None = None,
                  expires_at: datetime | None = None) -> Call[Entity]:
    return Call("POST", "/entities", Entity, body=_body(name=name, type=type, notes=notes, metadata=metadata,
                                                        user_id=user_id, expires_at=expires_at))


def get_entity(*, entity_id: int) -> Call[Entity]:
    return Call("GET", f"/entities/{_id(entity_id)}", Entity)


def entities_by_type(*, type: str, limit: int, offset: int) -> Call[EntityPage]:
    return Call("GET", f"/entities/by-type/{_segment(type)}", EntityPage, {"limit": limit, "offset": offset})


def find_entities(*, name: str, limit: int) -> Call[list[Entity]]:
    return Call("GET", "/entities/search", list[Entity], {"name": name, "limit": limit})


def delete_entity(*, entity_id: int) -> Call[None]:
    return Call("DELETE", f"/entities/{_id(entity_id)}", None)


def relationships(*, entity_id: int, direction: Direction, as_of: datetime | str | None = None) -> Call[list[Relationship]]:
    return Call("GET", f"/entities/{_id(entity_id)}/relationships", list[Relationship],
                {"direction": direction, "asOf": _stamp(as_of)})


def upsert_relationship(*, from_id: int, to_id: int, label: str, metadata: Meta | None,
                        user_id: str | None = None, valid_from: datetime | str | None = None,
                        valid_to: datetime | str | None = None, supersedes: bool = False) -> Call[Relationship]:
    return Call("POST", "/relationships", Relationship, body=_body(
        from_id=from_id, to_id=to_id, label=label, metadata=metadata, user_id=user_id, valid_from=_stamp(valid_from),
        valid_to=_stamp(valid_to), supersedes=supersedes or None))


def _stamp(value: datetime | str | None) -> str | None:
    """A date-time as RFC 3339 text (a naive datetime is UTC, as the service reads it)."""
    return value.isoformat() if isinstance(value, datetime) else value


# -- history and the change feed ------------------------------------------------------------------
HistoryKind = Literal["episodes", "entities", "relationships", "summaries"]


def history(*, kind: HistoryKind, record_id: int, after: int, limit: int) -> Call[History]:
    return Call("GET", f"/{kind}/{_id(record_id)}/history", History, {"after": after, "limit": limit})


def events(*, after: int, limit: int, wait: float) -> Call[Events]:
    return Call("GET", "/events", Events, {"after": after, "limit": limit, "wait": wait or None}, wait=wait)


def delete_relationship(*, from_id: int, to_id: int, label: str, user_id: str | None = None) -> Call[None]:
    return Call("DELETE", "/relationships", None, body=_body(from_id=from_id, to_id=to_id, label=label,
                                                           user_id=user_id))


# -- summaries ------------------------------------------------------------------------------------
def create_summary(*, session_id: int, content: str, first_episode_id: int | None, last_episode_id: int | None,
                   episode_count: int | None, token_count: int | None, metadata: Meta | None,
                   expires_at: datetime | None = None) -> Call[Summary]:
    return Call("POST", "/summaries", Summary, body=_body(
        session_id=session_id, content=content, first_episode_id=first_episode_id, last_episode_id=last_episode_id,
        episode_count=episode_count, token_count=token_count, metadata=metadata, expires_at=expires_at))


def get_summary(*, summary_id: int) -> Call[Summary]:
    return Call("GET", f"/summaries/{_id(summary_id)}", Summary)


def delete_summary(*, summary_id: int) -> Call[None]:
    return Call("DELETE", f"/summaries/{_id(summary_id)}", None)


# -- retrieval and operations ---------------------------------------------------------------------
def search(*, query: str, limit: int, session_id: int | None, sources: Sequence[Source], ranker: str | None,
           since: datetime | None, until: datetime | None, user_id: str | None = None,
           agent_id: str | None = None, metadata: Meta | None = None,
           min_score: float | None = None, read_your_writes: bool = True) -> Call[SearchResult]:
    return Call("POST", "/search", SearchResult, body=_body(
        query=query, limit=limit, session_id=session_id, sources=list(sources), ranker=ranker, since=since,
        until=until, user_id=user_id, agent_id=agent_id, filter={"metadata": metadata} if metadata else None,
        min_score=min_score, read_your_writes=None if read_your_writes else False), read_only=True)


def context(*, query: str, session_id: int | None, token_budget: int, recent_episodes: int, relevant_limit: int,
            ranker: str | None, user_id: str | None = None, agent_id: str | None = None,
            as_of: datetime | str | None = None) -> Call[ContextPackage]:
    return Call("POST", "/context", ContextPackage, body=_body(
        query=query, session_id=session_id, token_budget=token_budget, recent_episodes=recent_episodes,
        relevant_limit=relevant_limit, ranker=ranker, user_id=user_id, agent_id=agent_id, as_of=_stamp(as_of)),
        read_only=True)


def forget_user(*, user_id: str) -> Call[Forgotten]:
    return Call("DELETE", f"/users/{_segment(user_id)}", Forgotten)


def rankers() -> Call[list[Ranker]]:
    return Call("GET", "/rankers", list[Ranker])


def health() -> Call[dict[str, Any]]:
    return Call("GET", "/health", dict[str, Any])


def metrics() -> Call[str]:
    return Call("GET", "/metrics", str)
