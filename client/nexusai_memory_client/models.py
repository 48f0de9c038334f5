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
    valid_from: str | None = None  # absent on the wire when the edge has no validity
    valid_to: str | None = None


class Version(Wire):
    """One version of a record's history: the record ``before`` and ``after`` (None: deleted)."""

    version: int
    kind: str
    record_id: int
    op: str
    at: str
    actor: str | None
    before: Meta | None
    after: Meta | None
    changed: list[str]
    session_id: int | None = None
    user_id: str | None = None


class History(Wire):
    items: list[Version]
    next_after: int | None


class Event(Wire):
    seq: int
    kind: str
    record_id: int
    op: str
    at: str
    session_id: int | None = None
    user_id: str | None = None


class Events(Wire):
    events: list[Event]
    next_after: int
    truncated: bool


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
    history: int = 0  # versions of their records' history, forgotten with them


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
    """``relevance``: 0-1 on a fixed scale, the same for every ranker and query (what
    ``min_score`` compares with); ``score``: the ranker's own, which orders the hits."""

    source: str
    id: int
    score: float
    vector: Leg | None
    keyword: Leg | None
    episode: Episode | None = None
    entity: Entity | None = None
    summary: Summary | None = None
    relevance: float = 0.0


class SearchResult(Wire):
    """``pending``: records of the searched scope still waiting for their embedding (only their
    keywords can be found); ``min_score``: the relevance floor the hits were cut at."""

    ranker: str
    degraded: bool
    warnings: list[str]
    hits: list[SearchHit]
    pending: int = 0
    min_score: float = 0.0


class ScoredEpisode(Wire):
    episode: Episode
    score: float
    relevance: float = 0.0


class ScoredSummary(Wire):
    summary: Summary
    score: float
    relevance: float = 0.0


class Omitted(Wire):
    """``role``: why it was a candidate (relevant, recent, neighbour, mentioned); ``reason``: why
    it is left out (budget, relevantLimit)."""

    kind: str
    id: int
    tokens: int
    role: str = "relevant"
    reason: str = "budget"
    relevance: float | None = None


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
    neighbour_episodes: list[Episode] = msgspec.field(default_factory=list)
    pending: int = 0


class Ranker(Wire):
    name: str
    description: str
    plugin: str
    default: bool
