"""The in-memory unit of work: the unit runs under a lock and is undone when it raises."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from adapters.memory.entities import EntityTx
from adapters.memory.episodes import EpisodeTx
from adapters.memory.history import EventTx, HistoryTx
from adapters.memory.idempotency import IdempotencyTx
from adapters.memory.outbox import OutboxTx
from adapters.memory.sessions import SessionTx
from adapters.memory.state import MemoryState
from adapters.memory.summaries import SummaryTx
from domain.changes import DEFAULT_EVENT_RETENTION

T = TypeVar("T")


class MemoryTransaction:
    def __init__(self, state: MemoryState, event_retention: int) -> None:
        self.sessions = SessionTx(state)
        self.episodes = EpisodeTx(state)
        self.entities = EntityTx(state)
        self.summaries = SummaryTx(state)
        self.outbox = OutboxTx(state)
        self.history = HistoryTx(state)
        self.events = EventTx(state, event_retention)
        self.idempotency = IdempotencyTx(state)


class MemoryUnitOfWork:
    def __init__(self, state: MemoryState, event_retention: int = DEFAULT_EVENT_RETENTION) -> None:
        self._state = state
        self._tx = MemoryTransaction(state, event_retention)
        self._lock = threading.Lock()  # the unit is synchronous: no await can interleave inside it

    async def run(self, fn: Callable[[MemoryTransaction], T]) -> T:
        with self._lock:
            saved = self._state.snapshot()
            try:
                return fn(self._tx)
            except BaseException:
                self._state.restore(saved)
                raise
