"""Reading what changed: a record's history and the change feed (long-poll), over ``domain.changes``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from domain.changes import HISTORY_KINDS, Event, Version
from domain.errors import Busy, Invalid
from domain.limits import MAX_ACTOR, MAX_EVENT_WAIT, MAX_EVENT_WAITERS, MAX_EVENTS, MAX_ID, MAX_LIMIT
from domain.services import check_limit
from ports.store import Store

POLL_SECONDS = 0.5
"""How often a waiting long-poll looks at the store even without an in-process notification: a
write made by another process (or the CLI) on the same database file reaches it this late."""


WAITERS_RETRY_AFTER = 1  # seconds a poll refused at the waiter cap is told to wait: a waiter frees up soon


def check_actor(value: str | None) -> str | None:
    """An actor names who made a change (``X-Actor``): printable, at most ``MAX_ACTOR`` characters."""
    if value is None or value == "":
        return None
    if len(value) > MAX_ACTOR or not value.isprintable():
        raise Invalid(f"X-Actor must be printable text of at most {MAX_ACTOR} characters", field="X-Actor")
    return value


def _check_cursor(value: int, field: str) -> int:
    if not 0 <= value <= MAX_ID:
        raise Invalid(f"{field} must be between 0 and {MAX_ID}", field=field)
    return value


@dataclass(frozen=True, slots=True)
class HistoryPage:
    items: list[Version]
    next_after: int | None  # pass as ``after`` for the next page; None when this was the last


@dataclass(frozen=True, slots=True)
class EventBatch:
    events: list[Event]
    next_after: int  # the ``after`` of the next call (the last seq given, or the ``after`` asked)
    truncated: bool  # events after ``after`` were already trimmed (EVENT_RETENTION): some were missed


class HistoryService:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def of_record(self, kind: str, record_id: int, after: int = 0, limit: int = 100) -> HistoryPage:
        """A record's versions oldest first (also after it was deleted; none for an unknown id)."""
        if kind not in HISTORY_KINDS:
            raise Invalid(f"kind must be one of {', '.join(HISTORY_KINDS)}", field="kind")
        _check_cursor(after, "after")
        check_limit(limit, maximum=MAX_LIMIT)
        items = await self._store.history.of_record(kind, record_id, after, limit)
        return HistoryPage(items, items[-1].version if len(items) == limit else None)


class EventService:
    """The change feed. A long-poll waits for new events without holding a request slot (GET
    /events is exempt from admission control); at most ``MAX_EVENT_WAITERS`` wait at once: a poll
    that would wait beyond them is refused with ``Busy`` (never an empty page, which a client would
    read as a timeout and poll again at once). ``notify`` (after each write) wakes the waiters;
    ``close`` (shutdown) answers them at once. A cursor beyond the newest event is ``Invalid``:
    it was not handed out by this feed (another database, or a typo), and waiting on it would miss
    every event up to it."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._changed = asyncio.Event()
        self._closing = False
        self.waiting = 0

    def notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def close(self) -> None:
        self._closing = True
        self.notify()

    async def after(self, after: int = 0, limit: int = 100, wait: float = 0) -> EventBatch:
        _check_cursor(after, "after")
        check_limit(limit, maximum=MAX_EVENTS)
        if not 0 <= wait <= MAX_EVENT_WAIT:
            raise Invalid(f"wait must be between 0 and {MAX_EVENT_WAIT} seconds", field="wait")
        events = await self._store.events.after(after, limit)
        oldest, newest = await self._store.events.bounds()
        if not events and after > newest:
            raise Invalid(f"after ({after}) is beyond the newest event ({newest}): pass 0 or a nextAfter "
                          "this feed answered", field="after")
        if not events and wait > 0 and not self._closing:
            if self.waiting >= MAX_EVENT_WAITERS:
                raise Busy(f"{MAX_EVENT_WAITERS} long-polls are waiting already; retry after "
                           f"{WAITERS_RETRY_AFTER} s or poll without wait", retry_after=WAITERS_RETRY_AFTER)
            events = await self._wait(after, limit, time.monotonic() + wait)
            oldest, _ = await self._store.events.bounds()
        truncated = oldest > after + 1 and (not events or events[0].seq > after + 1)
        return EventBatch(events, events[-1].seq if events else after, truncated)

    async def _wait(self, after: int, limit: int, deadline: float) -> list[Event]:
        self.waiting += 1
        try:
            while not self._closing:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                changed = self._changed
                try:
                    await asyncio.wait_for(changed.wait(), timeout=min(POLL_SECONDS, remaining))
                except TimeoutError:
                    pass
                events = await self._store.events.after(after, limit)
                if events:
                    return events
            return []
        finally:
            self.waiting -= 1
