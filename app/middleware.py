"""Request ids, one log line per request, request metrics, and the gates every request passes
before routing: admission control, the API key and the body's media type.

``RequestObserver`` wraps the whole Litestar ASGI handler rather than sitting in Litestar's
per-route middleware stack: it must see requests that match no route (404/405) and the final
status of every response, after the exception handlers have turned errors into bodies. The
router fills ``scope["path_template"]`` in the same scope dict, so the route template is known
by the time the response starts.
"""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Collection
from contextvars import ContextVar

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from app.metrics import UNMATCHED_ROUTE, ServiceMetrics

log = logging.getLogger("nexusai.request")

# nginx's "client closed request": the client went away before the answer; not a server error.
CLIENT_CLOSED = 499
DISCONNECTED = "nexusai.disconnected"  # scope key: the client hung up mid-request

REQUEST_ID_HEADER = b"x-request-id"
MAX_REQUEST_ID = 128
# Printable ASCII without spaces: safe to echo in a header and to put into a log line.
_SANE_ID = re.compile(rf"[\x21-\x7e]{{1,{MAX_REQUEST_ID}}}")

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)


class _RequestIds:
    """32 hex characters like ``uuid4().hex``: 64 random bits drawn once per process, then a
    counter. Never repeated within a process; two processes share a prefix with odds of 1 in
    2**64. Spares an ``os.urandom`` call (a syscall) per request. A forked child draws its own
    prefix."""

    def __init__(self) -> None:
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._counter = itertools.count(1)

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter) & 0xFFFFFFFFFFFFFFFF:016x}"


new_request_id = _RequestIds().next


def accept_request_id(raw: bytes | None) -> str:
    """The caller's ``X-Request-ID`` when it is sane (1-128 printable ASCII characters, no
    spaces), else a fresh one, so a caller can correlate its logs with ours."""
    if raw:
        try:
            candidate = raw.decode("ascii")
        except UnicodeDecodeError:
            candidate = ""
        if _SANE_ID.fullmatch(candidate):
            return candidate
    return new_request_id()


class RequestIdFilter(logging.Filter):
    """Stamps ``request_id`` on records logged while a request is being handled (the JSON
    formatter copies it), so an error logged deep in a handler names its request."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            request_id = request_id_var.get()
            if request_id is not None:
                record.request_id = request_id
        return True


def install_request_id_filter(*logger_names: str) -> None:
    """Add ``RequestIdFilter`` to the named loggers (idempotent)."""
    for name in logger_names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RequestIdFilter) for f in logger.filters):
            logger.addFilter(RequestIdFilter())


class RequestObserver:
    """ASGI wrapper: assigns the request id, echoes it in ``X-Request-ID``, logs one line per
    request (method, route template, status, duration) and feeds ``metrics``."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics | None = None) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = next((v for k, v in scope.get("headers", ()) if k == REQUEST_ID_HEADER), None)
        request_id = accept_request_id(raw)
        token = request_id_var.set(request_id)
        status = 500  # what the client sees if the app dies before answering
        started = time.perf_counter()

        async def receive_watching() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                scope[DISCONNECTED] = True  # type: ignore[literal-required]
            return message

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != REQUEST_ID_HEADER]
                headers.append((REQUEST_ID_HEADER, request_id.encode("ascii")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive_watching, send_with_id)
        except BaseException:
            if scope.get(DISCONNECTED):
                status = CLIENT_CLOSED
                raise
            log.exception("request %s failed before answering", request_id,
                          extra={"request_id": request_id, "method": scope.get("method"),
                                 "path": scope.get("path_template") or UNMATCHED_ROUTE})
            raise
        finally:
            seconds = time.perf_counter() - started
            route = scope.get("path_template") or UNMATCHED_ROUTE
            method = scope.get("method", "")
            if scope.get(DISCONNECTED) and status >= 500:
                status = CLIENT_CLOSED  # the answer (if any) reached nobody; the client's doing
            if self.metrics is not None:
                self.metrics.observe_request(method, route, status, seconds)
            level = logging.ERROR if status >= 500 else logging.INFO
            if log.isEnabledFor(level):  # the fields are built only for a line that is written
                duration_ms = round(seconds * 1000, 3)
                log.log(level, "%s %s %s %.1fms request_id=%s", method, route, status, duration_ms, request_id,
                        extra={"request_id": request_id, "method": method, "path": route, "status": status,
                               "duration_ms": duration_ms})
            request_id_var.reset(token)


# -- gates before routing --------------------------------------------------------------------------
async def send_error(send: Send, status: int, code: str, message: str,
                     headers: Collection[tuple[bytes, bytes]] = ()) -> None:
    """Answer with the service's error shape without entering the app."""
    body = json.dumps({"code": code, "message": message, "field": None, "status": status}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


def is_open_path(path: str, open_paths: Collection[str]) -> bool:
    # The router serves "/health/" as "/health", so the gates must see them as one path too.
    return path in open_paths or (path.endswith("/") and (path.rstrip("/") or "/") in open_paths)


class AdmissionControl:
    """At most ``limit`` requests in flight; the next ones get 503 with ``Retry-After`` at once
    instead of queueing until they time out. ``exempt`` paths (health, metrics) always pass, so
    an overloaded service can still say so. ``limit`` 0 turns the gate off."""

    def __init__(self, app: ASGIApp, limit: int, exempt: Collection[str], retry_after: int = 1,
                 max_body: int = 1_048_576) -> None:
        self.app = app
        self.limit = limit
        self.max_body = max_body
        self.exempt = frozenset(exempt)
        self.in_flight = 0
        self.rejected = 0
        self.on_reject: Callable[[], None] | None = None  # metrics counted where they happen
        # Built once: under overload the refusal is the hot path.
        body = json.dumps({"code": "overloaded", "message": "the service is at its limit of requests in flight; "
                           "retry after the Retry-After delay", "field": None, "status": 503}).encode()
        self._refusal_start = {"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(retry_after).encode())]}
        self._refusal_body = {"type": "http.response.body", "body": body}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.limit <= 0 or is_open_path(scope["path"], self.exempt):
            await self.app(scope, receive, send)
            return
        if _has_body(scope):
            # A slow or stalled upload must not hold a slot: 64 clients trickling bodies would make
            # the service refuse everyone. The body (up to max_body; beyond it the app answers 413)
            # is read first, then replayed to the app.
            receive = await _body_first(receive, self.max_body)
        if self.in_flight >= self.limit:
            self.rejected += 1
            if self.on_reject is not None:
                self.on_reject()
            await send(self._refusal_start)
            await send(self._refusal_body)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def _has_body(scope: Scope) -> bool:
    length = (_header(scope, b"content-length") or b"0").strip()
    return length not in (b"0", b"") or _header(scope, b"transfer-encoding") is not None


async def _body_first(receive: Receive, max_body: int) -> Receive:
    """Read the request's body messages now (stopping past ``max_body`` bytes or at a disconnect)
    and return a ``receive`` that hands them out again, then continues with the real one."""
    return (await buffered_body(receive, max_body))[1]


async def buffered_body(receive: Receive, max_body: int) -> tuple[bytes | None, Receive]:
    """``_body_first``, and the whole body when it arrived complete within ``max_body`` bytes
    (None when it is larger, or the client went away)."""
    buffered: list[Message] = []
    size, complete = 0, False
    while True:
        message = await receive()
        buffered.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body") or size > max_body:
            complete = not message.get("more_body") and size <= max_body
            break
    body = b"".join(m.get("body", b"") for m in buffered) if complete else None
    buffered.reverse()

    async def replay() -> Message:
        return buffered.pop() if buffered else await receive()

    return body, replay


class ApiKeyGate:
    """Checks ``Authorization: Bearer <key>`` before routing, so a caller without the key learns
    nothing about which routes or methods exist (every path answers 401). ``open_paths`` (health)
    pass, marked ``scope["authenticated"]`` so they can hide details; CORS preflights pass so the
    CORS layer can answer them."""

    def __init__(self, app: ASGIApp, key: str | None, open_paths: Collection[str], cors: bool = False) -> None:
        self.app = app
        self.key = key.encode() if key else None
        self.open_paths = frozenset(open_paths)
        self.cors = cors

    def authorized(self, scope: Scope) -> bool:
        if self.key is None:
            return True
        scheme, _, token = (_header(scope, b"authorization") or b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token, self.key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.key is None:
            await self.app(scope, receive, send)
            return
        ok = self.authorized(scope)
        scope["authenticated"] = ok  # type: ignore[literal-required]
        preflight = self.cors and scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method")
        if ok or preflight or is_open_path(scope["path"], self.open_paths):
            await self.app(scope, receive, send)
            return
        await send_error(send, 401, "unauthorized",
                         "a valid 'Authorization: Bearer <MEMORY_API_KEY>' header is required",
                         [(b"www-authenticate", b'Bearer realm="memory"')])


_JSON_TYPE = re.compile(rb"^\s*application/(?:[\w.+-]+\+)?json\s*(?:;.*)?$", re.IGNORECASE)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class JsonBodiesOnly:
    """A request that carries a body must say ``Content-Type: application/json`` (415 otherwise).

    A web page can send a cross-origin "simple" request (text/plain, a form) without a CORS
    preflight; refusing every other media type means such a request can never write."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _BODY_METHODS:
            content_type = _header(scope, b"content-type")
            has_body = content_type is not None or (_header(scope, b"content-length") or b"0").strip() not in (b"0", b"") \
                or _header(scope, b"transfer-encoding") is not None
            if has_body and (content_type is None or not _JSON_TYPE.match(content_type)):
                shown = (content_type or b"none").decode("latin-1")[:100]
                await send_error(send, 415, "unsupported_media_type",
                                 f"request bodies must be JSON (Content-Type: application/json), got {shown!r}")
                return
        await self.app(scope, receive, send)
