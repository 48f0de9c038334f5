"""The memory's records: immutable values handed between the domain, its ports and the edges.

Timestamps are ISO-8601 UTC strings with milliseconds (``2026-01-02T03:04:05.678Z``); metadata is
a JSON object, kept parsed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

T = TypeVar("T")

Metadata = Mapping[str, Any]


def utc_now() -> str:
    """The current time in the store's timestamp format."""
    return format_timestamp(datetime.now(UTC))


def format_timestamp(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> datetime:
    """Parse a stored or client-given ISO-8601 timestamp; naive values are taken as UTC."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Session:
    id: int
    external_id: str
    metadata: Metadata
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class Episode:
    id: int
    session_id: int
    user_message: str
    ai_response: str
    token_count: int | None
    metadata: Metadata
    created_at: str

    @property
    def text(self) -> str:
        """The text that is embedded for this episode."""
        return f"User: {self.user_message}\nAssistant: {self.ai_response}"


@dataclass(frozen=True, slots=True)
class Entity:
    id: int
    name: str
    type: str
    notes: str | None
    metadata: Metadata
    created_at: str
    updated_at: str

    @property
    def text(self) -> str:
        parts = [self.name, self.type]
        if self.notes:
            parts.append(self.notes)
        return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class Relationship:
    id: int
    from_id: int
    to_id: int
    label: str
    metadata: Metadata
    created_at: str


@dataclass(frozen=True, slots=True)
class Summary:
    id: int
    session_id: int
    content: str
    first_episode_id: int | None
    last_episode_id: int | None
    episode_count: int
    token_count: int | None
    metadata: Metadata
    created_at: str

    @property
    def text(self) -> str:
        return self.content


# ---- inputs: what a caller supplies to create or change a record --------------------------------


@dataclass(frozen=True, slots=True)
class NewEpisode:
    session_id: int
    user_message: str
    ai_response: str
    token_count: int | None = None
    metadata: Metadata = field(default_factory=dict)
    created_at: str | None = None  # bulk imports may carry their original time


@dataclass(frozen=True, slots=True)
class EpisodeChanges:
    """Fields of an episode to change; ``None`` leaves a field as it is."""

    user_message: str | None = None
    ai_response: str | None = None
    token_count: int | None = None
    metadata: Metadata | None = None


@dataclass(frozen=True, slots=True)
class NewEntity:
    name: str
    type: str
    notes: str | None = None
    metadata: Metadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NewRelationship:
    from_id: int
    to_id: int
    label: str
    metadata: Metadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NewSummary:
    session_id: int
    content: str
    first_episode_id: int | None = None
    last_episode_id: int | None = None
    episode_count: int = 0
    token_count: int | None = None
    metadata: Metadata = field(default_factory=dict)


# ---- query results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: Sequence[T]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True, slots=True)
class Neighbours:
    """The ids of the episodes next to one episode in its session's order, nearest first on each side."""

    before: Sequence[int]
    after: Sequence[int]


@dataclass(frozen=True, slots=True)
class KeywordHit(Generic[T]):
    """One keyword-search result: the record and its BM25 relevance (higher is better)."""

    item: T
    score: float


@dataclass(frozen=True, slots=True)
class Upserted(Generic[T]):
    """The result of an upsert: the stored record and whether it was newly created."""

    item: T
    created: bool
