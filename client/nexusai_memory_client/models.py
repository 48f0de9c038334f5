"""The client's own wire types: what the service answers, as msgspec Structs with camelCase names.

They mirror the service's JSON, not its code: the client never imports the server. Unknown fields
are ignored when decoding, so a newer service that adds fields does not break an older client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

import msgspec

Meta = dict[str, Any]
T = TypeVar("T")


class Wire(msgspec.Struct, rename="camel", kw_only=True):
    pass


class NewEpisode(Wire, omit_defaults=True):
    """One episode for ``create_episodes`` (the batch route)."""

    session_id: int
    user_message: str
    ai_response: str
    token_count: int | None = None
    metadata: Meta = {}
    created_at: datetime | None = None
    expires_at: datetime | None = None


class Session(Wire):
    id: int
    external_id: str
    metadata: Meta
    created_at: str
    updated_at: str
    user_id: str | None = None
    agent_id: str | None = None


class Episode(Wire):
    id: int
    session_id: int
    user_message: str
    ai_response: str
    token_count: int | None
    metadata: Meta
    created_at: str
    expires_at: str | None = None


class Entity(Wire):
    id: int
    name: str
    type: str
    notes: str | None
    metadata: Meta
    created_at: str
    updated_at: str
    user_id: str | None = None
    expires_at: str | None = None


class Relationship(Wire):
    id: int
    from_id: int
    to_id: int
    label: str
    metadata: Meta
    created_at: str
    user_id: str | None = None


class Summary(Wire):
    id: int
    session_id: int
    content: str
    first_episode_id: int | None
    last_episode_id: int | None
    episode_count: int
    token_count: int | None
    metadata: Meta
    created_at: str
    expires_at: str | None = None


class Forgotten(Wire):
    """What ``forget_user`` removed, per kind."""

    sessions: int
    episodes: int
    summaries: int
    entities: int
    relationships: int


class SessionPage(Wire):
    items: list[Session]
    total: int
    limit: int
    offset: int


class EpisodePage(Wire):
    items: list[Episode]
    total: int
    limit: int
    offset: int


class EntityPage(Wire):
    items: list[Entity]
    total: int
    limit: int
    offset: int


class CursorPage(Wire, Generic[T]):
    """A keyset page (``list_episodes``, ``list_entities``, ...): pass ``next_cursor`` back as
    ``cursor`` for the next page; ``None`` on the last page."""

    items: list[T]
    limit: int
    next_cursor: str | None


class EpisodeHit(Wire):
    episode: Episode
    score: float


class EpisodeSearch(Wire):
    query: str
    match: str
    results: list[EpisodeHit]


class Leg(Wire):
    rank: int
    score: float


class SearchHit(Wire):
    source: str
    id: int
    score: float
    vector: Leg | None
    keyword: Leg | None
    episode: Episode | None = None
    entity: Entity | None = None
    summary: Summary | None = None


class SearchResult(Wire):
    ranker: str
    degraded: bool
    warnings: list[str]
    hits: list[SearchHit]


class ScoredEpisode(Wire):
    episode: Episode
    score: float


class ScoredSummary(Wire):
    summary: Summary
    score: float


class Omitted(Wire):
    kind: str
    id: int
    tokens: int


class ContextPackage(Wire):
    session_id: int | None
    query: str
    token_budget: int
    tokens_used: int
    recent_episodes: list[Episode]
    relevant_episodes: list[ScoredEpisode]
    summaries: list[ScoredSummary]
    entities: list[Entity]
    relationships: list[Relationship]
    omitted: list[Omitted]
    degraded: bool
    warnings: list[str]


class Ranker(Wire):
    name: str
    description: str
    plugin: str
    default: bool
