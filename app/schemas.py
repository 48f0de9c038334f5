"""Wire schemas: msgspec Structs with camelCase names, and the mapping from domain models."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec

from domain import limits
from domain.record_kinds import Source
from domain.context import ContextPackage
from domain.models import Entity, Episode, Summary, format_timestamp, to_utc
from domain.retrieval import SearchResult

Meta = dict[str, Any]
Text = Annotated[str, msgspec.Meta(max_length=limits.MAX_TEXT)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=limits.MAX_NAME)]
Id = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_ID)]
Count = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_COUNT)]
Query = Annotated[str, msgspec.Meta(min_length=1, max_length=limits.MAX_QUERY)]
RankerName = Annotated[str, msgspec.Meta(min_length=1, max_length=limits.MAX_RANKER_NAME)]


class Camel(msgspec.Struct, rename="camel", kw_only=True):
    pass


class Body(Camel, forbid_unknown_fields=True):
    """A request body: a field the service does not know is a 400 naming it, never ignored (a
    misspelt ``sessionId`` or ``minScore`` must not look understood)."""


# A date-time on the wire is an RFC 3339 string and nothing else. The fields are declared ``str``
# because Litestar converts bodies in msgspec's lax mode, where a ``datetime`` field also takes
# 0, "0" or 1.5 as Unix timestamps: a client's typo would silently mean 1970.
Timestamp = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"},
                                        examples=["2025-01-31T12:00:00.000Z"])]


def _utc(value: str | datetime | None, name: str) -> datetime | None:
    """The one datetime rule for request bodies: RFC 3339 text, then ``to_utc`` (range, naive = UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = msgspec.convert(value, datetime, strict=True)
        except msgspec.ValidationError:
            raise ValueError(f"{name}: must be an RFC 3339 date-time such as 2025-01-31T12:00:00Z, "
                             f"not {value[:40]!r}") from None
    try:
        return to_utc(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None  # msgspec turns it into a 400


def wire_timestamp(value: str | None, name: str) -> str | None:
    """A request's date-time (the ``_utc`` rule) in the store's canonical text, so text order is time
    order. This is the one parse of a client's time on a write: the domain and the store keep the text."""
    moment = _utc(value, name)
    return None if moment is None else format_timestamp(moment)


# -- requests -------------------------------------------------------------------------------------
class CreateSession(Body):
    external_id: Name
    metadata: Meta = {}
    user_id: Name | None = None
    agent_id: Name | None = None


class UpdateSession(Body):
    metadata: Meta


class CreateEpisode(Body):
    session_id: Id
    user_message: Text
    ai_response: Text
    token_count: Count | None = None
    metadata: Meta = {}
    created_at: Timestamp | None = None
    expires_at: Timestamp | None = None

    def __post_init__(self) -> None:
        self.created_at = wire_timestamp(self.created_at, "createdAt")
        self.expires_at = wire_timestamp(self.expires_at, "expiresAt")


class EpisodeBatch(Body):
    episodes: Annotated[list[CreateEpisode], msgspec.Meta(min_length=1, max_length=limits.MAX_BATCH)]


class UpsertEntity(Body):
    name: Name
    type: Name
    notes: Text | None = None
    metadata: Meta = {}
    user_id: Name | None = None
    expires_at: Timestamp | None = None

    def __post_init__(self) -> None:
        self.expires_at = wire_timestamp(self.expires_at, "expiresAt")


class UpsertRelationship(Body):
    from_id: Id
    to_id: Id
    label: Name
    metadata: Meta = {}
    user_id: Name | None = None
    valid_from: Timestamp | None = None
    valid_to: Timestamp | None = None
    supersedes: bool = False

    def __post_init__(self) -> None:
        self.valid_from, self.valid_to = wire_timestamp(self.valid_from, "validFrom"), wire_timestamp(self.valid_to, "validTo")


class DeleteRelationship(Body):
    from_id: Id
    to_id: Id
    label: Name


class CreateSummary(Body):
    session_id: Id
    content: Text
    first_episode_id: Id | None = None
    last_episode_id: Id | None = None
    episode_count: Count = 0
    token_count: Count | None = None
    metadata: Meta = {}
    expires_at: Timestamp | None = None

    def __post_init__(self) -> None:
        self.expires_at = wire_timestamp(self.expires_at, "expiresAt")


SourceName = Source  # the record kinds, from the one table in domain/record_kinds.py


class SearchFilter(Body):
    """``{"metadata": {key: value | {"in": [...]} | {"gte": x, "lte": y, "gt": .., "lt": ..} |
    {"exists": bool}}}``: every key must hold (``domain.filters``)."""
    metadata: dict[str, Any] | None = None


class SearchRequest(Body):
    query: Query
    limit: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_SEARCH_LIMIT)] = 10
    session_id: Id | None = None
    sources: Annotated[list[SourceName], msgspec.Meta(min_length=1, max_length=limits.MAX_SOURCES)] = msgspec.field(default_factory=lambda: ["episodes"])
    ranker: RankerName | None = None
    since: Timestamp | None = None
    until: Timestamp | None = None
    user_id: Name | None = None
    agent_id: Name | None = None
    filter: SearchFilter | None = None
    # On the 0-1 relevance scale (domain.relevance); unset: the ranker's floor, 0: every hit.
    min_score: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] | None = None
    read_your_writes: bool = True

    def __post_init__(self) -> None:
        self.since, self.until = _utc(self.since, "since"), _utc(self.until, "until")


class ContextRequest(Body, kw_only=True):
    query: Query
    session_id: Id | None = None
    token_budget: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_TOKEN_BUDGET)]
    recent_episodes: Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_RECENT_EPISODES)] = 5
    relevant_limit: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_RELEVANT)] = 10
    ranker: RankerName | None = None
    user_id: Name | None = None
    agent_id: Name | None = None
    as_of: Timestamp | None = None  # relationships valid at this moment (default: now)

    def __post_init__(self) -> None:
        self.as_of = wire_timestamp(self.as_of, "asOf")


# -- responses ------------------------------------------------------------------------------------
class SessionOut(Camel, omit_defaults=True):
    id: int
    external_id: str
    metadata: Meta
    created_at: str
    updated_at: str
    user_id: str | None = None  # left out when null: the seed's session bodies stay as they were
    agent_id: str | None = None


# Owner and expiry fields default to null and are left out when null, so the
# seed's bodies stay exactly as they were.
class EpisodeOut(Camel, omit_defaults=True):
    id: int
    session_id: int
    user_message: str
    ai_response: str
    token_count: int | None
    metadata: Meta
    created_at: str
    expires_at: str | None = None


class EntityOut(Camel, omit_defaults=True):
    id: int
    name: str
    type: str
    notes: str | None
    metadata: Meta
    created_at: str
    updated_at: str
    user_id: str | None = None
    expires_at: str | None = None


class RelationshipOut(Camel, omit_defaults=True):
    """``validFrom``/``validTo`` appear only when set: a relationship that never used them answers
    exactly as before they existed."""
    id: int
    from_id: int
    to_id: int
    label: str
    metadata: Meta
    created_at: str
    user_id: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None


class SummaryOut(Camel, omit_defaults=True):
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


T = TypeVar("T")


# One page of a list: ``total`` counts every record, ``items`` holds at most ``limit`` of them.
# The named subclasses keep the OpenAPI schema names (SessionPage, ...) the clients know.
class Page(Camel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class SessionPage(Page[SessionOut]):
    items: list[SessionOut]  # named again: Litestar's schema of a subclass does not resolve T


class EpisodePage(Page[EpisodeOut]):
    items: list[EpisodeOut]  # named again: Litestar's schema of a subclass does not resolve T


class EntityPage(Page[EntityOut]):
    items: list[EntityOut]  # named again: Litestar's schema of a subclass does not resolve T


class EpisodeHit(Camel):
    episode: EpisodeOut
    score: float


class EpisodeSearchOut(Camel):
    query: str
    match: str
    results: list[EpisodeHit]


class LegOut(Camel):
    rank: int
    score: float


class SearchHitOut(Camel):
    source: str
    id: int
    score: float
    relevance: float
    vector: LegOut | None
    keyword: LegOut | None
    episode: EpisodeOut | None = None
    entity: EntityOut | None = None
    summary: SummaryOut | None = None


class SearchOut(Camel):
    ranker: str
    degraded: bool
    warnings: list[str]
    hits: list[SearchHitOut]
    pending: int = 0
    min_score: float = 0.0


class ScoredEpisode(Camel):
    episode: EpisodeOut
    score: float
    relevance: float = 0.0


class ScoredSummary(Camel):
    summary: SummaryOut
    score: float
    relevance: float = 0.0


class OmittedOut(Camel):
    kind: str
    id: int
    tokens: int
    role: str  # relevant | recent | neighbour | mentioned
    reason: str  # budget | relevantLimit
    relevance: float | None = None


class ContextOut(Camel):
    session_id: int | None
    query: str
    token_budget: int
    tokens_used: int
    recent_episodes: list[EpisodeOut]
    relevant_episodes: list[ScoredEpisode]
    summaries: list[ScoredSummary]
    entities: list[EntityOut]
    relationships: list[RelationshipOut]
    omitted: list[OmittedOut]
    degraded: bool
    warnings: list[str]
    neighbour_episodes: list[EpisodeOut] = msgspec.field(default_factory=list)
    pending: int = 0


class RankerOut(Camel):
    name: str
    description: str
    plugin: str
    default: bool


class ErrorBody(Camel):
    code: str
    message: str
    field: str | None = None
    status: int = 400


# -- mapping --------------------------------------------------------------------------------------
W = TypeVar("W")


def new_record(body: Body, record: type[W]) -> W:
    """A create body as the domain input of the same field names (``CreateEpisode`` -> ``NewEpisode``,
    ``UpsertEntity`` -> ``NewEntity``...); its times are already canonical text (``wire_timestamp``)."""
    return record(**msgspec.structs.asdict(body))


def wire(value: Any, out: type[W]) -> W:
    """``value`` (a domain record, a page, a list of them...) as the wire type ``out``, field by
    field through msgspec (``from_attributes``: dataclass attributes are read by name)."""
    return msgspec.convert(value, out, from_attributes=True)


# A single episode is the hot path benchmarked against a Node peer (GET /episodes/:id, POST and
# PATCH /episodes), and there ``convert``'s fixed cost per call loses to a plain constructor:
# ~0.85 vs ~0.4 us map + encode. Lists and pages (GET /sessions/:id/episodes) measure the same
# either way within noise and go through ``wire``.
def episode_out(e: Episode) -> EpisodeOut:
    return EpisodeOut(id=e.id, session_id=e.session_id, user_message=e.user_message, ai_response=e.ai_response,
                      token_count=e.token_count, metadata=dict(e.metadata), created_at=e.created_at,
                      expires_at=e.expires_at)


_HIT_FIELD = {Episode: ("episode", EpisodeOut), Entity: ("entity", EntityOut), Summary: ("summary", SummaryOut)}


def search_out(result: SearchResult) -> SearchOut:
    """A search hit names its record in the field of its kind (``episode``, ``entity`` or ``summary``)."""
    hits = []
    for h in result.hits:
        field, out = _HIT_FIELD[type(h.item)]
        hits.append(SearchHitOut(source=h.source, id=h.item.id, score=h.score, relevance=round(h.relevance, 4),
                                 vector=wire(h.vector, LegOut | None), keyword=wire(h.keyword, LegOut | None),
                                 **{field: wire(h.item, out)}))
    return SearchOut(ranker=result.ranker, degraded=result.degraded, warnings=result.warnings, hits=hits,
                     pending=result.pending, min_score=result.floor)


def context_out(c: ContextPackage) -> ContextOut:
    """The package's scored lists are (record, score) pairs; every other field converts by name."""
    return ContextOut(
        session_id=c.session_id, query=c.query, token_budget=c.token_budget, tokens_used=c.tokens_used,
        recent_episodes=wire(c.recent_episodes, list[EpisodeOut]),
        relevant_episodes=[ScoredEpisode(episode=wire(e, EpisodeOut), score=s,
                                         relevance=round(c.relevance.get(("episode", e.id), 0.0), 4))
                           for e, s in c.relevant_episodes],
        summaries=[ScoredSummary(summary=wire(x, SummaryOut), score=s,
                                 relevance=round(c.relevance.get(("summary", x.id), 0.0), 4)) for x, s in c.summaries],
        entities=wire(c.entities, list[EntityOut]), relationships=wire(c.relationships, list[RelationshipOut]),
        omitted=wire(c.omitted, list[OmittedOut]), degraded=c.degraded, warnings=c.warnings,
        neighbour_episodes=wire(c.neighbour_episodes, list[EpisodeOut]), pending=c.pending,
    )
