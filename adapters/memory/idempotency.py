"""Stored answers of keyed writes in memory."""

from __future__ import annotations

from adapters.memory.state import MemoryState
from domain.idempotency import KeyedAnswer


def _live(state: MemoryState, caller: str, key: str, now: str) -> KeyedAnswer | None:
    found = state.idempotency.get((caller, key))
    return found if found is not None and found.expires_at > now else None


class MemoryIdempotency:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def get(self, caller: str, key: str, now: str) -> KeyedAnswer | None:
        return _live(self._s, caller, key, now)


class IdempotencyTx:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    def get(self, caller: str, key: str, now: str) -> KeyedAnswer | None:
        return _live(self._s, caller, key, now)

    def put(self, answer: KeyedAnswer) -> None:
        if _live(self._s, answer.caller, answer.key, answer.created_at) is not None:
            raise KeyError(f"idempotency key {answer.key!r} is already stored")
        self._s.idempotency[(answer.caller, answer.key)] = answer

    def delete_expired(self, now: str, limit: int) -> int:
        gone = [k for k, a in self._s.idempotency.items() if a.expires_at <= now][:limit]
        for k in gone:
            del self._s.idempotency[k]
        return len(gone)
