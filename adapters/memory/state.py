"""The in-memory store's tables, shared by its rooms, with the snapshot a unit of work rolls back to."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from domain.models import Entity, Episode, Metadata, Page, Relationship, Session, Summary, utc_now
from domain.changes import Event, Version
from domain.idempotency import KeyedAnswer
from domain.outbox import OutboxJob

_TABLES = ("sessions", "episodes", "entities", "relationships", "summaries", "outbox", "last_ids",
           "history", "events", "idempotency")


@dataclass
class MemoryState:
    sessions: dict[int, Session] = field(default_factory=dict)
    episodes: dict[int, Episode] = field(default_factory=dict)
    entities: dict[int, Entity] = field(default_factory=dict)
    relationships: dict[int, Relationship] = field(default_factory=dict)
    summaries: dict[int, Summary] = field(default_factory=dict)
    outbox: dict[int, OutboxJob] = field(default_factory=dict)
    last_ids: dict[str, int] = field(default_factory=dict)
    history: dict[int, Version] = field(default_factory=dict)
    events: dict[int, Event] = field(default_factory=dict)
    idempotency: dict[tuple[str, str], KeyedAnswer] = field(default_factory=dict)

    def next_id(self, table: str) -> int:
        """Ids count up per table from 1 (a rolled-back unit gives its ids back, as SQLite does)."""
        self.last_ids[table] = self.last_ids.get(table, 0) + 1
        return self.last_ids[table]

    def snapshot(self) -> tuple:
        # Records are frozen dataclasses: copying the dicts is a full snapshot.
        return tuple(dict(getattr(self, name)) for name in _TABLES)

    def restore(self, snapshot: tuple) -> None:
        for name, saved in zip(_TABLES, snapshot):
            setattr(self, name, saved)


def stored(metadata: Metadata) -> dict:
    """Metadata as a real store keeps it: by value (later changes by the caller do not leak in),
    JSON-shaped (tuples become lists, keys strings), and refused if JSON cannot hold it."""
    return json.loads(json.dumps(metadata or {}))


def page_of(ordered: list, limit: int, offset: int) -> Page:
    return Page(ordered[offset:offset + limit], len(ordered), limit, offset)


def live(item, now: str | None = None) -> bool:
    """Whether ``item`` has not expired (records without ``expires_at`` never do)."""
    expires = getattr(item, "expires_at", None)
    return expires is None or expires > (now or utc_now())
