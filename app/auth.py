"""Authentication: ``Authorization: Bearer <key>`` to a ``Principal``, a rate limit per key, and
the services as that principal sees them (``domain.scoped``), in ``scope["state"]``.

Two parts. ``RequestGates`` (``app.gates``) answers 401 to a request without an accepted key
before its body is judged (and, through the router's 404/405 handler, on paths that match no
route, so such a caller learns nothing about which routes exist), and resolves the principal once.
``KeyAuthentication``, the step of the same middleware after admission, decides what that principal may do on
the route reached, whatever spelling of its path got it there (a trailing or doubled slash,
percent-encoding, dot segments, an absolute-form target): there is one door per route, and the
open ones are named by their route template, not by a path string.

The rules:
- No ``MEMORY_API_KEY`` and no stored key: the service is open (every request acts as admin), as
  documented for a service on localhost.
- ``MEMORY_API_KEY`` is the bootstrap admin key, compared in constant time.
- A stored key (``nxm_...``) is found by the sha256 of the secret; revoked or expired keys are
  refused. Verified keys are cached for ``KEY_CACHE_SECONDS`` (a revocation made through this
  process takes effect at once, one made by another process within that time); the key's
  last use is written at most once a minute.
- 401 without a known key; 403 for what the key's scopes do not allow; 429 with ``Retry-After``
  past the key's rate (its own ``rateLimit``, else ``KEY_RATE_LIMIT``).
- Open to everyone: the health probes and the API docs (they describe the API and hold no
  records). ``/metrics`` needs an unbound key (its figures are service-wide). ``/admin/keys`` needs
  a key with the ``admin`` scope (``admin_principal``); an open service has none, so there keys are
  made with the CLI only: an anonymous caller must not be able to issue keys, nor close the
  service to everyone else by creating the first one. ``/mcp`` answers only a ``Host`` (and ``Origin``) it is allowed to
  (``MCP_ALLOWED_HOSTS``; default the loopback names and ``HOST``): a web page on another name
  that resolves to this machine (DNS rebinding) is refused before any key is looked at.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable, Collection
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from litestar.types import ASGIApp, Receive, Scope, Send

from domain.access import ADMIN, ADMIN_PRINCIPAL, KEY_PREFIX, OPEN_PRINCIPAL, ApiKey, Principal, hash_key, same_secret
from domain.errors import Forbidden
from domain.models import utc_now
from domain.scoped import Services, scoped
from ports.api_keys import ApiKeys

PRINCIPAL = "principal"  # scope["state"] keys
RESOLVED = "nexusai.principal"  # the scope key RequestGates leaves the principal under, before routing
SERVICES = "services"
# The same services for the route's dependency providers: reading a context variable keeps them
# free of parameters, which spares Litestar a signature model per provider and request.
request_services: ContextVar[Services | None] = ContextVar("request_services", default=None)
request_principal: ContextVar[Principal | None] = ContextVar("request_principal", default=None)
TOUCH_SECONDS = 60.0
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class TokenBucket:
    """``rate`` requests per second on average, bursts up to one second's worth (at least one)."""

    __slots__ = ("rate", "capacity", "tokens", "stamp")

    def __init__(self, rate: float, now: float) -> None:
        self.rate, self.capacity = rate, max(1.0, rate)
        self.tokens, self.stamp = self.capacity, now

    def take(self, now: float) -> float:
        """0 when a request may pass (a token taken), else the seconds until one may."""
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class Denied(Exception):
    def __init__(self, status: int, code: str, message: str, headers: Collection[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, list(headers)


UNAUTHORIZED_HEADERS = [(b"www-authenticate", b'Bearer realm="memory"')]


class Authenticator:
    """Resolves a bearer token to a principal, with a small cache of verified keys. One per app."""

    def __init__(self, keys: ApiKeys, bootstrap: str | None, *, default_rate: float = 0.0,
                 cache_seconds: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.keys = keys
        self.bootstrap = bootstrap
        self.default_rate = default_rate
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._verified: dict[str, tuple[float, ApiKey | None]] = {}  # hash -> (when read, key)
        self._any_keys: tuple[float, bool] = (-math.inf, False)
        self._touched: dict[int, float] = {}
        self._buckets: dict[int, TokenBucket] = {}

    def forget(self) -> None:
        """Drop what is cached (after a key is created or revoked here): the next request reads again.
        Whether the service is closed keeps its last known value until then: ``recognizes`` must not
        take a closed service for an open one in between."""
        self._verified.clear()
        self._any_keys = (-math.inf, self._any_keys[1])

    async def open_service(self) -> bool:
        """No key of any kind configured: the documented open service."""
        if self.bootstrap:
            return False
        now = self.clock()
        read_at, any_keys = self._any_keys
        if now - read_at >= self.cache_seconds:
            any_keys = await self.keys.count_active() > 0
            self._any_keys = (now, any_keys)
        return not any_keys

    async def principal(self, token: str | None) -> Principal:
        if token is None:
            if await self.open_service():
                return OPEN_PRINCIPAL
            raise Denied(401, "unauthorized", "a valid 'Authorization: Bearer <key>' header is required",
                         UNAUTHORIZED_HEADERS)
        if self.bootstrap and same_secret(token, self.bootstrap):
            return ADMIN_PRINCIPAL
        key = await self._stored(token) if token.startswith(KEY_PREFIX) else None
        if key is None or not key.usable_at(utc_now()):
            if token and await self.open_service():
                return OPEN_PRINCIPAL  # an open service ignores a stray header, as before keys existed
            raise Denied(401, "unauthorized", "the key is unknown, revoked or expired", UNAUTHORIZED_HEADERS)
        await self._touch(key)
        self._limit(key)
        return Principal.of(key)

    async def identifies(self, token: str | None) -> bool:
        """Whether ``token`` would be let in (an open service lets everyone in), never refusing and
        never counting against a rate."""
        if await self.open_service():
            return True
        if token is None:
            return False
        if self.bootstrap and same_secret(token, self.bootstrap):
            return True
        key = await self._stored(token) if token.startswith(KEY_PREFIX) else None
        return key is not None and key.usable_at(utc_now())

    def recognizes(self, token: str | None) -> bool:
        """Whether ``token`` is let in, judged without asking the store: for the router's own 404 and
        405, which are answered synchronously. A stored key this process has not verified lately
        counts as unknown there (401), and the service's open or closed state is the one last read
        (read at start-up and on every request)."""
        if self.bootstrap and token and same_secret(token, self.bootstrap):
            return True
        if not self.bootstrap and not self._any_keys[1]:
            return True  # the open service
        cached = self._verified.get(hash_key(token)) if token and token.startswith(KEY_PREFIX) else None
        return cached is not None and cached[1] is not None and cached[1].usable_at(utc_now())

    async def _stored(self, token: str) -> ApiKey | None:
        digest, now = hash_key(token), self.clock()
        cached = self._verified.get(digest)
        if cached is not None and now - cached[0] < self.cache_seconds:
            return cached[1]
        key = await self.keys.by_hash(digest)
        if key is not None and not same_secret(key.key_hash, digest):
            key = None  # the store answered another row: never trusted
        if len(self._verified) > 10_000:  # bounded: random tokens must not grow it forever
            self._verified.clear()
        self._verified[digest] = (now, key)
        return key

    async def _touch(self, key: ApiKey) -> None:
        now = self.clock()
        if now - self._touched.get(key.id, -math.inf) >= TOUCH_SECONDS:
            self._touched[key.id] = now
            await self.keys.touch(key.id, utc_now())

    def _limit(self, key: ApiKey) -> None:
        rate = self.default_rate if key.rate_limit is None else key.rate_limit
        if rate <= 0:
            return
        now = self.clock()
        bucket = self._buckets.get(key.id)
        if bucket is None or bucket.rate != rate:
            bucket = self._buckets[key.id] = TokenBucket(rate, now)
        wait = bucket.take(now)
        if wait > 0:
            raise Denied(429, "too_many_requests", f"this key's limit is {rate:g} requests per second; retry later",
                         [(b"retry-after", str(max(1, math.ceil(wait))).encode())])


def allowed_mcp_hosts(configured: Collection[str], bind_host: str) -> frozenset[str]:
    if configured:
        return frozenset(h.lower() for h in configured)
    names = set(LOOPBACK_NAMES)
    if bind_host not in _WILDCARD_HOSTS:
        names.add(bind_host.strip("[]").lower())
    return frozenset(names)


def _host_name(value: str) -> str:
    """``example.com`` of ``example.com:3002``, ``::1`` of ``[::1]:3002``."""
    return (urlsplit(f"//{value}").hostname or "").lower()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _mount_path(scope: Scope) -> str:
    """A mounted app's route (``/mcp``) has no template and its path is cut to the rest: its
    handler's own path names it."""
    handler: Any = scope.get("route_handler")
    return next(iter(getattr(handler, "paths", ()) or ()), scope["path"])


def check_mcp_origin(scope: Scope, hosts: Collection[str]) -> None:
    """``Denied`` (403) unless the ``Host`` and any ``Origin`` name one of ``hosts`` ("*": any)."""
    if "*" in hosts:
        return
    host = _host_name(_header(scope, b"host") or "")
    if host not in hosts:
        raise Denied(403, "forbidden", f"/mcp does not answer for host {host!r} (MCP_ALLOWED_HOSTS)")
    origin = _header(scope, b"origin")
    if origin is not None and (urlsplit(origin).hostname or "").lower() not in hosts:
        raise Denied(403, "forbidden", "/mcp does not answer requests from this Origin (MCP_ALLOWED_HOSTS)")


def bearer_token(scope: Scope) -> str | None:
    raw = _header(scope, b"authorization")
    if raw is None:
        return None
    scheme, _, token = raw.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class KeyAuthentication:
    """The one door of every route (see the module's docstring). Not a middleware layer of its own:
    ``RequestGates`` calls ``handle`` once it has admitted the request (each layer costs a call and
    a closure per request). ``then``, when given, runs in place of the route for the requests it
    claims (``app.idempotency`` for keyed writes), once the principal and its services are set."""

    def __init__(self, authenticator: Authenticator, plain: Services, *, open_paths: Collection[str],
                 open_prefixes: tuple[str, ...], metrics_path: str, mcp_path: str, mcp_hosts: Collection[str],
                 then: Callable[[Scope, Receive, Send, ASGIApp], Awaitable[bool]] | None = None) -> None:
        self.authenticator = authenticator
        self.plain = plain
        self.open_paths = frozenset(open_paths)
        self.open_prefixes = open_prefixes
        self.metrics_path = metrics_path
        self.mcp_path = mcp_path
        self.mcp_hosts = frozenset(mcp_hosts)
        self.then = then

    def _open(self, template: str) -> bool:
        return template in self.open_paths or template.startswith(self.open_prefixes)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        # The route's template ("/sessions/{session_id}"), set by the router: one name per route,
        # whichever spelling of the path reached it.
        template = scope.get("path_template") or _mount_path(scope)
        if self._open(template):
            # Open, but whether the caller holds a key still decides how much /health tells it.
            scope["authenticated"] = await self.authenticator.identifies(bearer_token(scope))  # type: ignore[typeddict-unknown-key]
            await next_app(scope, receive, send)
            return
        try:
            if template == self.mcp_path:
                check_mcp_origin(scope, self.mcp_hosts)
            principal = scope.get(RESOLVED)  # type: ignore[misc]
            if principal is None:  # a path the gate before routing took for an open one
                principal = await self.authenticator.principal(bearer_token(scope))
            if template == self.metrics_path and principal.bound:
                raise Denied(403, "forbidden", "metrics are service-wide: they need a key not bound to a user")
        except Denied as denied:
            await send_denied(send, denied)
            return
        state = scope.setdefault("state", {})  # type: ignore[typeddict-item]
        state[PRINCIPAL] = principal
        state[SERVICES] = services = scoped(principal, self.plain)
        token, who = request_services.set(services), request_principal.set(principal)
        try:
            if self.then is None or not await self.then(scope, receive, send, next_app):
                await next_app(scope, receive, send)
        finally:
            request_services.reset(token)
            request_principal.reset(who)


async def send_denied(send: Send, denied: Denied) -> None:
    body = json.dumps({"code": denied.code, "message": denied.message, "field": None,
                       "status": denied.status}).encode()
    await send({"type": "http.response.start", "status": denied.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *denied.headers]})
    await send({"type": "http.response.body", "body": body})


def admin_principal() -> Principal:
    """The principal of this request when it may manage keys; ``Forbidden`` otherwise. Checked as the
    key routes' dependency, so their input is validated first (a bad body is a 400 for anyone)."""
    principal = request_principal.get()
    if principal is None or not principal.authenticated or ADMIN not in principal.scopes:
        raise Forbidden("managing keys needs a key with the 'admin' scope (on a service without "
                        "MEMORY_API_KEY: the `memory-service keys` commands)")
    return principal


def services_of(state: dict) -> Services | None:
    """The services of the request whose ``scope["state"]`` this is (None when it passed no door)."""
    return state.get(SERVICES)
