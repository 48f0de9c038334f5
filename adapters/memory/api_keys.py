"""``InMemoryApiKeys``: API key records in a dict, the double of ``SqliteApiKeys``."""

from __future__ import annotations

from dataclasses import replace

from domain.access import ApiKey
from domain.errors import Conflict


class InMemoryApiKeys:
    def __init__(self) -> None:
        self._keys: dict[int, ApiKey] = {}
        self._next = 1

    async def create(self, key: ApiKey) -> ApiKey:
        if any(k.key_hash == key.key_hash for k in self._keys.values()):
            raise Conflict("a key with this hash exists", field="key")
        stored = replace(key, id=self._next)
        self._keys[stored.id] = stored
        self._next += 1
        return stored

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        return next((k for k in self._keys.values() if k.key_hash == key_hash), None)

    async def get(self, key_id: int) -> ApiKey | None:
        return self._keys.get(key_id)

    async def list(self) -> list[ApiKey]:
        return [self._keys[i] for i in sorted(self._keys)]

    async def revoke(self, key_id: int, at: str) -> ApiKey | None:
        key = self._keys.get(key_id)
        if key is None:
            return None
        if key.revoked_at is None:
            key = self._keys[key_id] = replace(key, revoked_at=at)
        return key

    async def touch(self, key_id: int, at: str) -> None:
        if key_id in self._keys:
            self._keys[key_id] = replace(self._keys[key_id], last_used_at=at)

    async def count_active(self) -> int:
        return sum(1 for k in self._keys.values() if k.revoked_at is None)
