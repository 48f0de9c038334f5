"""Record history and the change feed in memory."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

from adapters.memory.state import MemoryState
from domain.changes import Event, EventOp, HistoryOp, Version

TRIM_EVERY = 256  # as the SQLite feed: trimmed to its retention once per this many appends


class MemoryHistory:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def of_record(self, kind: str, record_id: int, after: int, limit: int) -> list[Version]:
        found = [v for n, v in sorted(self._s.history.items())
                 if v.kind == kind and v.record_id == record_id and n > after]
        return copy.deepcopy(found[:limit])


class HistoryTx:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    def append(self, kind: str, record_id: int, op: HistoryOp, at: str, actor: str | None,
               before: dict | None, after: dict | None, changed: Sequence[str],
               session_id: int | None, user_id: str | None) -> int:
        number = self._s.next_id("record_history")
        self._s.history[number] = Version(number, kind, record_id, op, at, actor, copy.deepcopy(before),
                                          copy.deepcopy(after), list(changed), session_id, user_id)
        return number

    def _forget(self, gone) -> int:
        numbers = [n for n, v in self._s.history.items() if gone(v)]
        for n in numbers:
            del self._s.history[n]
        return len(numbers)

    def forget_records(self, kind: str, record_ids: Sequence[int]) -> int:
        ids = set(record_ids)
        return self._forget(lambda v: v.kind == kind and v.record_id in ids)

    def forget_session(self, session_id: int) -> int:
        return self._forget(lambda v: v.session_id == session_id)

    def forget_user(self, user_id: str) -> int:
        return self._forget(lambda v: v.user_id == user_id)


class MemoryEvents:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def after(self, seq: int, limit: int) -> list[Event]:
        return [e for n, e in sorted(self._s.events.items()) if n > seq][:limit]

    def on_change(self, wake: Callable[[], None]) -> None:
        return None  # only this process writes it: its own writes wake its readers

    async def bounds(self) -> tuple[int, int]:
        return (min(self._s.events), max(self._s.events)) if self._s.events else (0, 0)


class EventTx:
    def __init__(self, state: MemoryState, keep: int) -> None:
        self._s = state
        self._keep = keep

    def append(self, kind: str, record_id: int, op: EventOp, at: str, session_id: int | None,
               user_id: str | None) -> int:
        seq = self._s.next_id("change_events")
        self._s.events[seq] = Event(seq, kind, record_id, op, at, session_id, user_id)
        if seq % TRIM_EVERY == 0:
            self.trim(self._keep)
        return seq

    def trim(self, keep: int) -> int:
        if not self._s.events:
            return 0
        cut = max(self._s.events) - keep
        gone = [n for n in self._s.events if n <= cut]
        for n in gone:
            del self._s.events[n]
        return len(gone)
