"""Who may do what: API keys, the principal a request acts as, and the access rules as pure functions.

A key's secret is ``nxm_`` and 32 random bytes (URL-safe base64); only its sha256 hash is stored,
so a stolen database holds no usable key. The hash is a lookup index, not a password hash: the
secret has 256 bits of entropy, so a slow hash would add cost and no safety. Where a presented
secret is compared with a known one, the comparison takes constant time.

A key may be bound to an owner (``user_id``, optionally ``agent_id``): it then sees and changes
only that owner's records. Records without an owner (the seed's global sessions and entities) are
readable by every key with ``read`` unless the key has ``global_read`` off, and writable only by
unbound keys: a bound key never changes what everyone sees.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from domain.errors import Forbidden, Invalid
from domain.limits import MAX_NAME
from domain.models import Owner, format_timestamp, parse_timestamp

READ, WRITE, FORGET, ADMIN = "read", "write", "forget", "admin"
SCOPES = (READ, WRITE, FORGET, ADMIN)
DEFAULT_SCOPES = (READ, WRITE)
KEY_PREFIX = "nxm_"
MAX_RATE = 100_000.0  # requests per second: beyond it a limit means nothing


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored key: never its secret, only the secret's hash."""

    id: int
    name: str
    key_hash: str
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    user_id: str | None = None
    agent_id: str | None = None
    expires_at: str | None = None  # ISO-8601 UTC; None: never
    rate_limit: float | None = None  # requests per second; None: the service default; 0: unlimited
    global_read: bool = True  # may read records without an owner
    created_at: str = ""
    last_used_at: str | None = None
    revoked_at: str | None = None

    def usable_at(self, now: str) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as. ``key_id`` None: the bootstrap key or an open service (no key set)."""

    scopes: frozenset[str]
    key_id: int | None = None
    user_id: str | None = None
    agent_id: str | None = None
    rate_limit: float | None = None
    global_read: bool = True
    authenticated: bool = True  # False: a service with no key configured, where nobody is identified
    name: str = field(default="", compare=False)

    @property
    def bound(self) -> bool:
        return self.user_id is not None

    @property
    def unrestricted(self) -> bool:
        return not self.bound and self.scopes >= frozenset(SCOPES)

    @property
    def actor(self) -> str:
        """The name the history records as the author of this principal's changes."""
        return f"key:{self.key_id}" if self.key_id is not None else "key:admin"

    @classmethod
    def of(cls, key: ApiKey) -> "Principal":
        return cls(frozenset(key.scopes), key.id, key.user_id, key.agent_id, key.rate_limit, key.global_read,
                   key.name)


# The bootstrap key (MEMORY_API_KEY) and a service with no key configured act with every scope.
ADMIN_PRINCIPAL = Principal(frozenset(SCOPES))
OPEN_PRINCIPAL = Principal(frozenset(SCOPES), authenticated=False)


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def same_secret(presented: str, known: str) -> bool:
    """Constant-time: how much of a guess matched never shows in the time taken."""
    return hmac.compare_digest(presented.encode("utf-8"), known.encode("utf-8"))


def check_scopes(scopes: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise Invalid(f"scopes must be a non-empty list of {', '.join(SCOPES)}", field="scopes")
    return tuple(dict.fromkeys(scopes))


def new_key(name: str, *, scopes: tuple[str, ...] | list[str] = DEFAULT_SCOPES, user_id: str | None = None,
            agent_id: str | None = None, expires_at: str | None = None, rate_limit: float | None = None,
            global_read: bool = True, now: str) -> tuple[str, ApiKey]:
    """A fresh secret and the record to store for it (id 0 until stored). The secret is the only
    copy: the caller shows it once."""
    for label, value in (("name", name), ("userId", user_id), ("agentId", agent_id)):
        if value is not None and (not value.strip() or len(value) > MAX_NAME or "\x00" in value):
            raise Invalid(f"{label} must be a non-empty name of at most {MAX_NAME} characters", field=label)
    chosen = check_scopes(scopes)
    if agent_id is not None and user_id is None:
        raise Invalid("agentId binds a key only together with userId", field="agentId")
    if ADMIN in chosen and user_id is not None:
        raise Invalid("a key bound to a user cannot have the admin scope", field="scopes")
    if expires_at is not None:
        try:  # stored in the store's timestamp form, so expiry is a comparison of text
            expires_at = format_timestamp(parse_timestamp(expires_at))
        except (ValueError, OverflowError):
            raise Invalid("expiresAt must be an ISO-8601 date-time", field="expiresAt") from None
    if rate_limit is not None and not 0 <= rate_limit <= MAX_RATE:
        raise Invalid(f"rateLimit must be between 0 and {MAX_RATE:g} requests per second", field="rateLimit")
    secret = new_secret()
    return secret, ApiKey(0, name, hash_key(secret), chosen, user_id, agent_id, expires_at, rate_limit,
                          global_read, now)


# -- the rules ------------------------------------------------------------------------------------
def require(principal: Principal, scope: str) -> None:
    if scope not in principal.scopes:
        raise Forbidden(f"this key lacks the {scope!r} scope")


def may_see(principal: Principal, user_id: str | None, agent_id: str | None = None) -> bool:
    """May ``principal`` read a record of this owner? ``agent_id`` is the record's agent (records of
    sessions carry one; entities and relationships belong to a user only and pass None)."""
    if READ not in principal.scopes:
        return False
    if not principal.bound:
        return True
    if user_id is None:
        return principal.global_read
    if user_id != principal.user_id:
        return False
    return principal.agent_id is None or agent_id is None or agent_id == principal.agent_id


def may_change(principal: Principal, user_id: str | None, agent_id: str | None = None, *,
               agents: bool = True) -> bool:
    """May ``principal`` change (update, delete, add to) a record of this owner? A bound key
    changes its owner's records only, never the global ones. ``agents``: the record kind has an
    agent (sessions and what is in them); entities and relationships belong to a user alone, so a
    key bound to an agent changes its user's, as it creates them."""
    if WRITE not in principal.scopes:
        return False
    if not principal.bound:
        return True
    return user_id == principal.user_id and (
        principal.agent_id is None or not agents or agent_id == principal.agent_id)


def writing_owner(principal: Principal, owner: Owner, *, agents: bool = True) -> Owner:
    """The owner a new record of ``principal`` gets from a body naming ``owner``: the body's, when
    it is the key's. A bound key must name its owner (a record without one would be everyone's):
    ``Forbidden`` naming the field that is missing or differs. ``agents``: the record kind has an
    agent (sessions); entities and relationships do not."""
    require(principal, WRITE)
    if not principal.bound:
        return owner
    if owner.user_id != principal.user_id:
        raise Forbidden(f"userId must be {principal.user_id!r}, the user this key is bound to", field="userId")
    if agents and principal.agent_id is not None and owner.agent_id != principal.agent_id:
        raise Forbidden(f"agentId must be {principal.agent_id!r}, the agent this key is bound to", field="agentId")
    return owner


def reading_owner(principal: Principal, owner: Owner) -> Owner:
    """The owner filter of a list or search by ``principal``: a bound key's own, whatever the
    request left out; naming another owner is ``Forbidden`` naming the field."""
    require(principal, READ)
    if not principal.bound:
        return owner
    if owner.user_id is not None and owner.user_id != principal.user_id:
        raise Forbidden(f"userId must be {principal.user_id!r}, the user this key is bound to", field="userId")
    if principal.agent_id is not None and owner.agent_id not in (None, principal.agent_id):
        raise Forbidden(f"agentId must be {principal.agent_id!r}, the agent this key is bound to", field="agentId")
    return Owner(principal.user_id, principal.agent_id or owner.agent_id)


def may_forget(principal: Principal, user_id: str) -> None:
    require(principal, FORGET)
    if principal.bound and user_id != principal.user_id:
        raise Forbidden(f"this key may forget only user {principal.user_id!r}", field="userId")
    # Forgetting a user removes every agent's records of theirs, which an agent's key cannot see.
    if principal.agent_id is not None:
        raise Forbidden(f"a key bound to agent {principal.agent_id!r} may not forget its user: that removes "
                        "the records of every agent; use a key bound to the user alone", field="userId")
