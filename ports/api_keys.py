"""API keys as records: the port the access rules read keys through.

A key is stored by the sha256 hash of its secret only; the secret itself is shown once, when it is
issued, and never kept. Lookups are by hash, so verifying a presented key is one indexed read.
"""

from __future__ import annotations

from typing import Protocol

from domain.access import ApiKey


class ApiKeys(Protocol):
    async def create(self, key: ApiKey) -> ApiKey:
        """Store ``key`` (its ``id`` is ignored) and answer it with its new id. Ids are positive
        integers, never reused. Two keys with the same hash are a ``Conflict``."""
        ...

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        """The key whose hash is ``key_hash``, revoked or not (the caller judges); None if none."""
        ...

    async def get(self, key_id: int) -> ApiKey | None:
        """The key with this id, revoked or not; None if none."""
        ...

    async def list(self) -> list[ApiKey]:
        """Every key, revoked ones included, by id ascending."""
        ...

    async def revoke(self, key_id: int, at: str) -> ApiKey | None:
        """Mark the key revoked at ``at`` (ISO-8601 UTC); revoking a revoked key keeps the first time.
        None when there is no such key."""
        ...

    async def touch(self, key_id: int, at: str) -> None:
        """Record ``at`` as the key's last use; an unknown id is a no-op."""
        ...

    async def count_active(self) -> int:
        """How many keys are not revoked (expired ones count: expiry is judged at use)."""
        ...
