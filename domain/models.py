"""The memory's records: immutable values handed between the domain, its ports and the edges.

Timestamps are ISO-8601 UTC strings with milliseconds (``2026-01-02T03:04:05.678Z``), years
always four digits; metadata is a JSON object, kept parsed.

Every datetime a client gives (``createdAt``, ``since``, ``until``, imported rows) follows one rule,
``to_utc``: an offset is honoured, a naive value is taken as UTC, and the instant must lie within
``EARLIEST``..``LATEST`` (UTC years 0001-9999, the range four-digit ISO-8601 years can write).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Final, Generic, Literal, TypeVar

from domain.errors import Invalid

T = TypeVar("T")

Metadata = Mapping[str, Any]


EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
RANGE_TEXT = "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"


def to_utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (naive means UTC); ``ValueError`` outside the range."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        converted = moment.astimezone(UTC)
    except OverflowError:
        converted = None
    if converted is None or not EARLIEST <= converted <= LATEST:
        raise ValueError(f"{moment.isoformat()} is outside the supported range {RANGE_TEXT}")
    return converted


_last_now: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """The current time in the store's timestamp format: ``format_timestamp(datetime.now(UTC))``
    (the same clock, the microseconds floored the same way), the text made once per millisecond
    (a POST asks for it three times, and the writer's group commit of many in the same one)."""
    global _last_now
    ms = time.time_ns() // 1_000_000
    last = _last_now
    if last[0] == ms:
        return last[1]
    seconds, millis = divmod(ms, 1000)
    t = time.gmtime(seconds)
    text = (f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:"
            f"{t.tm_sec:02d}.{millis:03d}Z")
    _last_now = (ms, text)
    return text


def format_timestamp(moment: datetime) -> str:
    moment = to_utc(moment)
    # strftime's %Y does not zero-pad years below 1000 on every platform; the format must.
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
            f"{moment.second:02d}.{moment.microsecond // 1000:03d}Z")


def parse_timestamp(text: str) -> datetime:
    """Parse a stored or client-given ISO-8601 timestamp by the ``to_utc`` rule (``ValueError``
    when it is not one, or out of range)."""
    return to_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


@dataclass(frozen=True, slots=True)
class Session:
    id: int
    external_id: str
    metadata: Metadata
    created_at: str
    updated_at: str
    user_id: str | None = None  # the owner, fixed at creation; None: nobody's (the seed's sessions)
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class Episode:
    id: int
    session_id: int
    user_message: str
    ai_response: str
    token_count: int | None
    metadata: Metadata
    created_at: str
    user_id: str | None = None  # the session's owner, copied (a session's owner never changes)
    agent_id: str | None = None
    expires_at: str | None = None  # from then on the episode is never returned, and is purged

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
    user_id: str | None = None  # None: a global entity (unique by name and type among the global ones)
    expires_at: str | None = None

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
    user_id: str | None = None
    valid_from: str | None = None  # when the fact became true (None: always was, as far as known)
    valid_to: str | None = None  # when it stopped being true (None: still is, an open edge)

    def valid_at(self, moment: str) -> bool:
        """Whether the edge holds at ``moment`` (a canonical timestamp): from inclusive, to exclusive."""
        return (self.valid_from is None or self.valid_from <= moment) and (self.valid_to is None or moment < self.valid_to)


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
    user_id: str | None = None  # the session's owner, copied
    agent_id: str | None = None
    expires_at: str | None = None

    @property
    def text(self) -> str:
        return self.content


# ---- inputs: what a caller supplies to create or change a record --------------------------------
# Their times are canonical timestamps (``format_timestamp``): the edge that parses a client's time
# (the wire schemas, the importers) writes that text once and the store keeps it as given.


@dataclass(frozen=True, slots=True)
class NewEpisode:
    session_id: int
    user_message: str
    ai_response: str
    token_count: int | None = None
    metadata: Metadata = field(default_factory=dict)
    created_at: str | None = None  # None: now; bulk imports carry their original time
    expires_at: str | None = None


class Keep(Enum):
    """The value of a field a partial update leaves as it is (``None`` is a value: it clears)."""

    KEEP = "keep"

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final[Literal[Keep.KEEP]] = Keep.KEEP

# The fields of each kind of change that may be cleared with None; the others are required.
NULLABLE: dict[str, frozenset[str]] = {
    "EpisodeChanges": frozenset({"token_count"}),
    "EntityChanges": frozenset({"notes"}),
    "SummaryChanges": frozenset({"first_episode_id", "last_episode_id", "token_count"}),
}


def check_changes(changes: Any) -> None:
    """A required field set to None is an Invalid naming it (the wire's camelCase name)."""
    nullable = NULLABLE[type(changes).__name__]
    for f in fields(changes):
        if getattr(changes, f.name) is None and f.name not in nullable:
            head, *rest = f.name.split("_")
            wire = head + "".join(p.title() for p in rest)
            raise Invalid(f"{wire}: cannot be null (it is required; leave it out to keep it)", field=wire)


def merged(changes: Any, old: Any) -> dict[str, Any]:
    """Every field of ``changes`` with ``KEEP`` replaced by ``old``'s value: the record's new values."""
    return {f.name: getattr(old, f.name) if getattr(changes, f.name) is KEEP else getattr(changes, f.name)
            for f in fields(changes)}


@dataclass(frozen=True, slots=True)
class EpisodeChanges:
    """Fields of an episode to change (a partial update, JSON Merge Patch's rule): ``KEEP`` leaves a
    field as it is, ``None`` clears a nullable field (``token_count``) and is refused on the others."""

    user_message: str | Keep = KEEP
    ai_response: str | Keep = KEEP
    token_count: int | None | Keep = KEEP
    metadata: Metadata | Keep = KEEP


@dataclass(frozen=True, slots=True)
class NewEntity:
    name: str
    type: str
    notes: str | None = None
    metadata: Metadata = field(default_factory=dict)
    user_id: str | None = None
    expires_at: str | None = None


@dataclass(frozen=True, slots=True)
class EntityChanges:
    """A partial update of an entity: ``KEEP`` fields stay as they are; ``notes=None`` (or ``""``) clears the notes."""

    name: str | Keep = KEEP
    type: str | Keep = KEEP
    notes: str | None | Keep = KEEP
    metadata: Metadata | Keep = KEEP


@dataclass(frozen=True, slots=True)
class NewRelationship:
    from_id: int
    to_id: int
    label: str
    metadata: Metadata = field(default_factory=dict)
    user_id: str | None = None
    valid_from: str | None = None  # canonical timestamps (the wire checks RFC 3339)
    valid_to: str | None = None
    supersedes: bool = False  # close the other open edges of (from_id, label) at valid_from (or now)


@dataclass(frozen=True, slots=True)
class NewSummary:
    session_id: int
    content: str
    first_episode_id: int | None = None
    last_episode_id: int | None = None
    episode_count: int = 0
    token_count: int | None = None
    metadata: Metadata = field(default_factory=dict)
    expires_at: str | None = None


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose records a search, a context or a list covers: a user, an agent, or both (AND).
    An empty owner covers everything (the seed's behaviour)."""

    user_id: str | None = None
    agent_id: str | None = None

    def __bool__(self) -> bool:
        return self.user_id is not None or self.agent_id is not None


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
    before: T | None = None  # the record as it was, when an existing one was replaced


@dataclass(frozen=True, slots=True)
class SummaryChanges:
    """A partial update of a summary: ``KEEP`` fields stay as they are; ``None`` clears the episode
    ids or the token count."""

    content: str | Keep = KEEP
    first_episode_id: int | None | Keep = KEEP
    last_episode_id: int | None | Keep = KEEP
    episode_count: int | Keep = KEEP
    token_count: int | None | Keep = KEEP
    metadata: Metadata | Keep = KEEP
