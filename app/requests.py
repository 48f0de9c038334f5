"""Request bodies: msgspec Structs decoded strictly (``Body``), and the one rule for a client's date-time."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

from app.schemas import Body, Count, Id, Meta, Name, Query, RankerName, Text
from domain import limits
from domain.models import format_timestamp, to_utc
from domain.record_kinds import Source

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
    user_id: Name | None = None  # only this owner's edges; a key bound to a user: its own


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
