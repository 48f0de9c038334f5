"""What changed: record history (versions) and the change feed (events), both written in the
transaction of the change itself (``domain.writes``).

A *version* is appended for every update and delete of an episode, entity, relationship or
summary: the operation, when, who (the actor the request named, if any), the record before and
after (``None`` after a delete), and the names of the fields that changed. History outlives the
record (that is its point); it is forgotten with the record's session (deleting a session forgets
its records' history) and with its owner (``writes.forget_history_of_user``).

An *event* is appended for every create, update and delete of a session, episode, entity,
relationship or summary, and when the embedding worker has embedded a record. Events carry ids
only (kind, record id, session id, user id when the record has one), never content, so a
consumer reads the record itself; their sequence numbers only grow.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import Any, Literal

HistoryOp = Literal["updated", "deleted"]
EventOp = Literal["created", "updated", "deleted", "embedded"]
DEFAULT_EVENT_RETENTION = 100_000  # EVENT_RETENTION's default: the newest events kept
HISTORY_KINDS = ("episodes", "entities", "relationships", "summaries")
EVENT_KINDS = ("sessions", *HISTORY_KINDS)

# The actor of the current request (``X-Actor``), read when a version is written. A unit of work
# runs its function inside a copy of the caller's context, so it is seen on the writer thread too.
actor: ContextVar[str | None] = ContextVar("actor", default=None)


@dataclass(frozen=True, slots=True)
class Version:
    """One version of a record's history; ``version`` grows across all records (a cursor)."""

    version: int
    kind: str
    record_id: int
    op: HistoryOp
    at: str
    actor: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changed: list[str]
    session_id: int | None = None
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the change feed; ``seq`` grows and is never reused."""

    seq: int
    kind: str
    record_id: int
    op: EventOp
    at: str
    session_id: int | None = None
    user_id: str | None = None


def image(record: Any) -> dict[str, Any]:
    """A record's fields as a plain dict (metadata copied), the stored form of a version."""
    return {f.name: _plain(getattr(record, f.name)) for f in fields(record)}


def changed_fields(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """The fields whose value differs (every field of ``before`` when the record was deleted)."""
    if after is None:
        return sorted(before or {})
    return sorted(k for k in after if (before or {}).get(k) != after[k])


def owner_of(record: Any) -> str | None:
    """The record's user id, else ``None``."""
    return getattr(record, "user_id", None)


def _plain(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
