"""Wire schemas: msgspec Structs with camelCase names, and the mapping from domain models."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from domain.context import ContextPackage
from domain.models import Entity, Episode, Page, Relationship, Session, Summary, to_utc
from domain.retrieval import LegInfo, SearchResult

Meta = dict[str, Any]
Text = Annotated[str, msgspec.Meta(max_length=100_000)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=512)]
Id = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]
Count = Annotated[int, msgspec.Meta(ge=0, le=2**31)]


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


# -- requests -------------------------------------------------------------------------------------
class CreateSession(Body):
    external_id: Name
    metadata: Meta = {}


class UpdateSession(Body):
    metadata: Meta


class CreateEpisode(Body):
    session_id: Id
    user_message: Text
    ai_response: Text
    token_count: Count | None = None
    metadata: Meta = {}
    created_at: Timestamp | None = None

    def __post_init__(self) -> None:
        self.created_at = _utc(self.created_at, "createdAt")


class EpisodeBatch(Body):
    episodes: Annotated[list[CreateEpisode], msgspec.Meta(min_length=1, max_length=1000)]


class UpdateEpisode(Body):
    user_message: Text | None = None
    ai_response: Text | None = None
    token_count: Count | None = None
    metadata: Meta | None = None


class UpsertEntity(Body):
    name: Name
    type: Name
    notes: Text | None = None
    metadata: Meta = {}


class UpsertRelationship(Body):
    from_id: Id
    to_id: Id
    label: Name
    metadata: Meta = {}


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


SourceName = Literal["episodes", "entities", "summaries"]


class SearchRequest(Body):
    query: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
    limit: Annotated[int, msgspec.Meta(ge=1, le=200)] = 10
    session_id: Id | None = None
    sources: Annotated[list[SourceName], msgspec.Meta(min_length=1, max_length=3)] = msgspec.field(default_factory=lambda: ["episodes"])
    ranker: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    since: Timestamp | None = None
    until: Timestamp | None = None

    def __post_init__(self) -> None:
        self.since, self.until = _utc(self.since, "since"), _utc(self.until, "until")


class ContextRequest(Body):
    query: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
    session_id: Id
    token_budget: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]
    recent_episodes: Annotated[int, msgspec.Meta(ge=0, le=100)] = 5
    relevant_limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    ranker: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


# -- responses ------------------------------------------------------------------------------------
class SessionOut(Camel):
    id: int
    external_id: str
    metadata: Meta
    created_at: str
    updated_at: str


class EpisodeOut(Camel):
    id: int
    session_id: int
    user_message: str
    ai_response: str
    token_count: int | None
    metadata: Meta
    created_at: str


class EntityOut(Camel):
    id: int
    name: str
    type: str
    notes: str | None
    metadata: Meta
    created_at: str
    updated_at: str


class RelationshipOut(Camel):
    id: int
    from_id: int
    to_id: int
    label: str
    metadata: Meta
    created_at: str


class SummaryOut(Camel):
    id: int
    session_id: int
    content: str
    first_episode_id: int | None
    last_episode_id: int | None
    episode_count: int
    token_count: int | None
    metadata: Meta
    created_at: str


class SessionPage(Camel):
    items: list[SessionOut]
    total: int
    limit: int
    offset: int


class EpisodePage(Camel):
    items: list[EpisodeOut]
    total: int
    limit: int
    offset: int


class EntityPage(Camel):
    items: list[EntityOut]
    total: int
    limit: int
    offset: int


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


class ScoredEpisode(Camel):
    episode: EpisodeOut
    score: float


class ScoredSummary(Camel):
    summary: SummaryOut
    score: float


class OmittedOut(Camel):
    kind: str
    id: int
    tokens: int


class ContextOut(Camel):
    session_id: int
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
def session_out(s: Session) -> SessionOut:
    return SessionOut(id=s.id, external_id=s.external_id, metadata=dict(s.metadata), created_at=s.created_at,
                      updated_at=s.updated_at)


def episode_out(e: Episode) -> EpisodeOut:
    return EpisodeOut(id=e.id, session_id=e.session_id, user_message=e.user_message, ai_response=e.ai_response,
                      token_count=e.token_count, metadata=dict(e.metadata), created_at=e.created_at)


def entity_out(e: Entity) -> EntityOut:
    return EntityOut(id=e.id, name=e.name, type=e.type, notes=e.notes, metadata=dict(e.metadata),
                     created_at=e.created_at, updated_at=e.updated_at)


def relationship_out(r: Relationship) -> RelationshipOut:
    return RelationshipOut(id=r.id, from_id=r.from_id, to_id=r.to_id, label=r.label, metadata=dict(r.metadata),
                           created_at=r.created_at)


def summary_out(s: Summary) -> SummaryOut:
    return SummaryOut(id=s.id, session_id=s.session_id, content=s.content, first_episode_id=s.first_episode_id,
                      last_episode_id=s.last_episode_id, episode_count=s.episode_count, token_count=s.token_count,
                      metadata=dict(s.metadata), created_at=s.created_at)


def session_page(p: Page[Session]) -> SessionPage:
    return SessionPage(items=[session_out(s) for s in p.items], total=p.total, limit=p.limit, offset=p.offset)


def episode_page(p: Page[Episode]) -> EpisodePage:
    return EpisodePage(items=[episode_out(e) for e in p.items], total=p.total, limit=p.limit, offset=p.offset)


def entity_page(p: Page[Entity]) -> EntityPage:
    return EntityPage(items=[entity_out(e) for e in p.items], total=p.total, limit=p.limit, offset=p.offset)


def _leg(info: LegInfo | None) -> LegOut | None:
    return LegOut(rank=info.rank, score=info.score) if info else None


def search_out(result: SearchResult) -> SearchOut:
    hits = []
    for h in result.hits:
        hit = SearchHitOut(source=h.source, id=h.item.id, score=h.score, vector=_leg(h.vector), keyword=_leg(h.keyword))
        if isinstance(h.item, Episode):
            hit.episode = episode_out(h.item)
        elif isinstance(h.item, Entity):
            hit.entity = entity_out(h.item)
        else:
            hit.summary = summary_out(h.item)
        hits.append(hit)
    return SearchOut(ranker=result.ranker, degraded=result.degraded, warnings=result.warnings, hits=hits)


def context_out(c: ContextPackage) -> ContextOut:
    return ContextOut(
        session_id=c.session_id, query=c.query, token_budget=c.token_budget, tokens_used=c.tokens_used,
        recent_episodes=[episode_out(e) for e in c.recent_episodes],
        relevant_episodes=[ScoredEpisode(episode=episode_out(e), score=s) for e, s in c.relevant_episodes],
        summaries=[ScoredSummary(summary=summary_out(x), score=s) for x, s in c.summaries],
        entities=[entity_out(e) for e in c.entities],
        relationships=[relationship_out(r) for r in c.relationships],
        omitted=[OmittedOut(kind=o.kind, id=o.id, tokens=o.tokens) for o in c.omitted],
        degraded=c.degraded, warnings=c.warnings,
    )
