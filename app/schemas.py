"""Wire schemas: the shared field types, the response Structs with camelCase names, and the mapping
between them and domain models. Request bodies are in ``app/requests.py``."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

import msgspec

from domain import limits
from domain.context import ContextPackage
from domain.models import Entity, Episode, Summary
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
