"""Writes a client can retry safely: an idempotency key stores the write's answer with the write.

A request that carries a key (``Idempotency-Key`` on HTTP, ``idempotencyKey`` on MCP) runs its one
write unit through ``keyed``: inside the same transaction the unit first looks the key up (a key
already answered raises ``AlreadyAnswered`` and the unit writes nothing), then does its write, then
stores the answer the entry point rendered from the unit's result. A crash after the commit
therefore cannot lose the answer, and a retry can never write twice: the stored answer and the
write commit together or not at all.

The entry point owns the request: it names the caller, hashes the request (``fingerprint``), and
turns the unit's result into the bytes it will send (``Claim.render``). It hands the claim to the
unit through ``pending`` (a context variable), so a service needs no parameter for it: the first
write unit run while a claim is pending takes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from domain.errors import Conflict, DomainError, Invalid
from domain.models import utc_now

T = TypeVar("T")

MAX_KEY = 255
DEFAULT_KEY_SECONDS = 86_400.0  # a day: longer than any client's retry schedule


class KeyReused(DomainError):
    """The key was already used for a different request (another body, path, method or caller)."""

    code = "idempotency_key_reused"


class KeyInFlight(Conflict):
    """A request with this key is still running; retry after it has answered."""

    code = "idempotency_key_in_flight"


@dataclass(frozen=True, slots=True)
class Answer:
    """What the entry point sent for a keyed write: a status and the body bytes (empty for a 204)."""

    status: int
    body: bytes


@dataclass(frozen=True, slots=True)
class KeyedAnswer:
    """One stored key: whose (``caller``), which request (``fingerprint``), the answer, and when it expires."""

    caller: str
    key: str
    fingerprint: str
    status: int
    body: bytes
    created_at: str
    expires_at: str


class AlreadyAnswered(Exception):
    """Raised inside a unit whose key was answered (by another process, or a request that finished
    meanwhile): the unit is rolled back and the entry point replays ``found``."""

    def __init__(self, found: KeyedAnswer) -> None:
        super().__init__(found.key)
        self.found = found


@dataclass(slots=True)
class Claim:
    """A keyed request on its way to its write unit; ``stored`` is set by the unit that took it."""

    caller: str
    key: str
    fingerprint: str
    expires_at: str
    render: Callable[[Any], Answer] | None = None
    stored: KeyedAnswer | None = field(default=None)


pending: ContextVar[Claim | None] = ContextVar("pending_idempotency_claim", default=None)


def check_key(key: str, field_name: str = "Idempotency-Key") -> str:
    """A key is 1-255 printable ASCII characters (a UUID is the usual choice)."""
    if not key or len(key) > MAX_KEY or not all(" " <= c <= "~" for c in key):
        raise Invalid(f"{field_name} must be 1-{MAX_KEY} printable ASCII characters", field=field_name)
    return key


def fingerprint(method: str, path: str, body: bytes, caller: str) -> str:
    """The request a key stands for: the same key with another fingerprint is a ``KeyReused``."""
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), caller.encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    digest.update(body)
    return digest.hexdigest()


def expiry_after(seconds: float, now: str | None = None) -> str:
    """The store timestamp ``seconds`` after ``now`` (default: the present)."""
    start = datetime.fromisoformat((now or utc_now()).replace("Z", "+00:00"))
    moment = (start + timedelta(seconds=seconds)).astimezone(timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def replay_of(found: KeyedAnswer, fingerprint_: str, field_name: str = "Idempotency-Key") -> KeyedAnswer:
    """``found`` when it answers the same request; ``KeyReused`` naming the key otherwise."""
    if found.fingerprint != fingerprint_:
        raise KeyReused(f"{field_name} {found.key!r} was already used for a different request", field=field_name)
    return found


def keyed(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """``fn`` as a unit that stores the pending claim's answer with its write (``fn`` itself when no
    claim is pending). Only the first unit of a request takes the claim."""
    claim = pending.get()
    if claim is None or claim.render is None:
        return fn
    pending.set(None)

    def unit(tx) -> T:
        now = utc_now()
        found = tx.idempotency.get(claim.caller, claim.key, now)
        if found is not None:
            raise AlreadyAnswered(found)
        result = fn(tx)
        answer = claim.render(result)
        stored = KeyedAnswer(claim.caller, claim.key, claim.fingerprint, answer.status, answer.body, now,
                             claim.expires_at)
        try:
            tx.idempotency.put(stored)
        except KeyError:
            # Stored since the check above by a write this transaction could not see yet: another
            # replica's, or this key's first request, cancelled when its client went away while
            # its transaction still ran. That write is the one that counts; answer as it did.
            found = tx.idempotency.get(claim.caller, claim.key, utc_now())
            if found is None:
                raise
            raise AlreadyAnswered(found) from None
        claim.stored = stored
        return result

    return unit
