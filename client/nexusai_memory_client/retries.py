"""Retrying a call safely: which failures are worth another attempt, how long to wait, and the
idempotency key that makes a retried write safe.

A write gets an ``Idempotency-Key`` (a fresh UUID per call, the same on every attempt of it): the
service stores the write's answer with the write, so a retry after a lost answer is answered from
there and never writes twice. Transient failures are retried with exponential backoff and jitter:
no answer at all (connection refused, reset or timed out), 429, 503 that says ``Retry-After``, and
409 ``idempotency_key_in_flight`` (the first attempt is still running). Everything else is the
answer. A write sent without a key is retried only when it surely never left (a refused
connection): otherwise a retry could store it twice.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

import httpx

WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
IDEMPOTENCY_HEADER = "Idempotency-Key"
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class Retries:
    """How a client retries. ``attempts`` counts the first one (1: never retry); the n-th retry
    waits about ``backoff * 2**(n-1)`` seconds (jittered), at most ``max_delay``; a ``Retry-After``
    longer than ``max_delay`` is not waited for (the error is raised instead)."""

    attempts: int = 4
    backoff: float = 0.2
    max_delay: float = 10.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff < 0 or self.max_delay < 0:
            raise ValueError("attempts must be >= 1, backoff and max_delay >= 0")

    def _backoff(self, attempt: int) -> float:
        return min(self.max_delay, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def after_error(self, attempt: int, exc: httpx.HTTPError, *, safe: bool) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` after ``exc`` (no answer), or None to give up.
        ``safe``: the call may be repeated (a read, or a write with its key)."""
        if attempt >= self.attempts or not isinstance(exc, httpx.TransportError):
            return None
        if not safe and not isinstance(exc, _NEVER_SENT):
            return None
        return self._backoff(attempt)

    def after_response(self, attempt: int, response: httpx.Response, *, safe: bool) -> float | None:
        """Seconds to wait before another attempt after ``response``, or None when it is the answer."""
        if attempt >= self.attempts or not safe:
            return None
        status, retry_after = response.status_code, _seconds(response.headers.get("retry-after"))
        if status == 429 or (status in (503, 409) and retry_after is not None):
            if status == 409 and _code(response) != "idempotency_key_in_flight":
                return None
            wait = self._backoff(attempt) if retry_after is None else retry_after
            return wait if wait <= self.max_delay else None
        return None


NO_RETRIES = Retries(attempts=1)


def key_for(method: str, read_only: bool, given: str | None, enabled: bool) -> str | None:
    """The idempotency key of one call: the caller's, else a fresh UUID for a write when keys are on."""
    if given is not None:
        return given
    return str(uuid.uuid4()) if enabled and method in WRITE_METHODS and not read_only else None


def _seconds(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the delta form; an HTTP date is not worth a clock dependency)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("code") if isinstance(body, dict) else None
