"""Issuing, listing and revoking API keys (the CLI's ``keys`` commands and ``/admin/keys``)."""

from __future__ import annotations

from dataclasses import dataclass

from domain.access import DEFAULT_SCOPES, ApiKey, new_key
from domain.errors import NotFound
from domain.models import utc_now
from ports.api_keys import ApiKeys


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A new key's record and its secret: the only time the secret exists outside its holder."""

    key: ApiKey
    secret: str


class KeyService:
    def __init__(self, keys: ApiKeys) -> None:
        self._keys = keys

    async def create(self, name: str, *, scopes: tuple[str, ...] | list[str] = DEFAULT_SCOPES,
                     user_id: str | None = None, agent_id: str | None = None, expires_at: str | None = None,
                     rate_limit: float | None = None, global_read: bool = True) -> IssuedKey:
        secret, key = new_key(name, scopes=scopes, user_id=user_id, agent_id=agent_id, expires_at=expires_at,
                              rate_limit=rate_limit, global_read=global_read, now=utc_now())
        return IssuedKey(await self._keys.create(key), secret)

    async def list(self) -> list[ApiKey]:
        return await self._keys.list()

    async def revoke(self, key_id: int) -> ApiKey:
        revoked = await self._keys.revoke(key_id, utc_now())
        if revoked is None:
            raise NotFound(f"key {key_id} does not exist")
        return revoked
