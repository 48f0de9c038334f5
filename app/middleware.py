"""Request ids and admission control: the pieces of the request gates (``app.gates``) that stand
on their own. ``AdmissionControl`` is also a plain ASGI wrapper, so it can be driven without an app.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Collection
from contextvars import ContextVar

from litestar.types import ASGIApp, Message, Receive, Scope, Send

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


async def send_error(send: Send, status: int, code: str, message: str,
                     headers: Collection[tuple[bytes, bytes]] = ()) -> None:
    """Answer with the service's error shape without entering the app."""
    body = json.dumps({"code": code, "message": message, "field": None, "status": status}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def header(scope: Scope, name: bytes) -> bytes | None:
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
    an overloaded service can still say so. ``limit`` 0 turns the gate off.

    One instance counts for the whole app: ``app.gates`` calls ``admit`` with the route's app.
    Called itself, it guards ``app`` (None when only ``admit`` is used)."""

    def __init__(self, app: ASGIApp | None, limit: int, exempt: Collection[str], retry_after: int = 1,
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
        assert self.app is not None, "built without an app: call admit()"
        await self.admit(scope, receive, send, self.app)

    def passes(self, scope: Scope) -> bool:
        """True for a request the gate lets through uncounted."""
        return scope["type"] != "http" or self.limit <= 0 or is_open_path(scope["path"], self.exempt)

    async def admit(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """Run ``app`` for the request in a slot, or refuse it with 503."""
        if self.passes(scope):
            await app(scope, receive, send)
            return
        if has_body(scope):
            # A slow or stalled upload must not hold a slot: 64 clients trickling bodies would make
            # the service refuse everyone. The body (up to max_body; beyond it the app answers 413)
            # is read first, then replayed to the app.
            receive = await body_first(receive, self.max_body)
        if self.in_flight >= self.limit:
            self.rejected += 1
            if self.on_reject is not None:
                self.on_reject()
            await self.refuse(scope, send)
            return
        self.in_flight += 1
        await self.run_in_slot(scope, receive, send, app)

    async def run_in_slot(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """Run ``app`` in the slot already counted for it, and free the slot as the response's last
        byte is handed to the server: the server may start the connection's next request then,
        before ``app`` has returned, and that request must find the slot free (a client with as
        many connections as the limit would otherwise meet spurious 503s)."""
        done = False

        async def send_then_free(message: Message) -> None:
            nonlocal done
            await send(message)
            if not done and message["type"] == "http.response.body" and not message.get("more_body", False):
                done = True
                self._release()

        try:
            await app(scope, receive, send_then_free)
        finally:
            if not done:
                done = True
                self._release()

    def _release(self) -> None:
        self.in_flight -= 1

    async def refuse(self, scope: Scope, send: Send) -> None:
        # Marked so the request log skips it: under overload a refusal must cost as little as
        # possible (no log line; admission has its own counter).
        scope[REFUSED] = True  # type: ignore[literal-required]
        await send(self._refusal_start)
        await send(self._refusal_body)


REFUSED = "nexusai.refused"  # scope key: admission control answered 503


def has_body(scope: Scope) -> bool:
    length = (header(scope, b"content-length") or b"0").strip()
    return length not in (b"0", b"") or header(scope, b"transfer-encoding") is not None


async def body_first(receive: Receive, max_body: int) -> Receive:
    """Read the request's body messages now (stopping past ``max_body`` bytes or at a disconnect)
    and return a ``receive`` that hands them out again, then continues with the real one."""
    buffered: list[Message] = []
    size = 0
    while True:
        message = await receive()
        buffered.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body") or size > max_body:
            break
    buffered.reverse()

    async def replay() -> Message:
        return buffered.pop() if buffered else await receive()

    return replay
