"""The wire shapes of ``/admin/keys``: a key's record (never its hash) and, once, its secret."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from app.schemas import Body, Camel
from domain.access import MAX_RATE
from domain.limits import MAX_NAME

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME)]
Scope = Literal["read", "write", "forget", "admin"]


class CreateKey(Body):
    name: Name
    scopes: Annotated[list[Scope], msgspec.Meta(min_length=1, max_length=4)] = msgspec.field(
        default_factory=lambda: ["read", "write"])
    user_id: Name | None = None
    agent_id: Name | None = None
    expires_at: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    rate_limit: Annotated[float, msgspec.Meta(ge=0, le=MAX_RATE)] | None = None
    global_read: bool = True


class KeyOut(Camel):
    id: int
    name: str
    scopes: list[str]
    user_id: str | None
    agent_id: str | None
    expires_at: str | None
    rate_limit: float | None
    global_read: bool
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


class CreatedKeyOut(KeyOut):
    key: str  # the secret: shown in this answer only
