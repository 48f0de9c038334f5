"""Stored answers of keyed writes (``domain.idempotency``): the key, the request's fingerprint, the answer."""

from __future__ import annotations

from typing import Protocol

from domain.idempotency import KeyedAnswer


class IdempotencyRecords(Protocol):
    async def get(self, caller: str, key: str, now: str) -> KeyedAnswer | None:
        """The answer stored for ``(caller, key)``, or None when there is none or it expired by ``now``
        (an expired key is as good as unknown: the sweep may not have removed it yet)."""
        ...


class IdempotencyWrites(Protocol):
    """Synchronous, valid only inside ``UnitOfWork.run``: an answer commits with its write."""

    def get(self, caller: str, key: str, now: str) -> KeyedAnswer | None:
        """As ``IdempotencyRecords.get``, inside the unit (sees what the unit wrote)."""
        ...

    def put(self, answer: KeyedAnswer) -> None:
        """Store ``answer`` for ``(answer.caller, answer.key)``, replacing an expired one; a key that
        is stored and not expired raises (the unit is then rolled back)."""
        ...

    def delete_expired(self, now: str, limit: int) -> int:
        """Delete up to ``limit`` answers that expired by ``now``; returns how many went."""
        ...
