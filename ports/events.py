"""The change feed: an append-only, bounded log of record changes (``domain.changes.Event``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from domain.changes import Event, EventOp


class Events(Protocol):
    async def after(self, seq: int, limit: int) -> list[Event]:
        """Events with ``seq > seq``, in order, at most ``limit``."""
        ...

    async def bounds(self) -> tuple[int, int]:
        """(oldest seq kept, newest seq); ``(0, 0)`` when the feed is empty."""
        ...


    def on_change(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (from any thread, at most once per commit) when another process sharing
        the store commits events, so waiting readers look at once. A store that cannot tell may
        never call it: readers then find others' events when they look again."""
        ...


class EventWrites(Protocol):
    """Synchronous, valid only inside ``UnitOfWork.run``: an event commits with its change."""

    def append(self, kind: str, record_id: int, op: EventOp, at: str, session_id: int | None,
               user_id: str | None) -> int:
        """Append one event; returns its ``seq`` (greater than every earlier one, never reused,
        also after the oldest events were trimmed)."""
        ...

    def trim(self, keep: int) -> int:
        """Delete the oldest events so that at most ``keep`` remain; returns how many went."""
        ...
