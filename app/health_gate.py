"""``/health``, ``/health/live`` and ``/health/ready`` answered in the outermost ASGI layer.

Under a flood every request shares one event loop; a health probe that goes through admission
control, the request observer, the API-key and media-type gates, Litestar's routing, its
dependency resolution and its response machinery waits behind all of that work and costs as much
as a small API call. ``HealthGate`` answers a plain ``GET`` of the three health paths from the
monitor's snapshot itself (the same bodies, status codes and headers the Litestar routes give),
so a probe costs a dictionary lookup and a small JSON encode. Anything unusual — another method,
a query string, an ``Origin`` header (CORS) — falls through to the app, which answers exactly as
before.

The request id is echoed and the request counted in the metrics like any other, and it is logged
like any other request.

``HealthFirstProtocol`` (uvicorn's httptools protocol, which ``serve`` runs) goes one step further:
a probe ``HealthGate`` answers is run in the read callback that parsed it, not as a task queued
behind the steps of every request in flight. Under a flood of 64-256 connections that queue is
what a probe waited in: /health p50 7-11 → 4-6 ms (bench/hardening.py, round 6).
"""

from __future__ import annotations

import contextvars
import hmac
import logging
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import msgspec
from litestar.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.health import HealthMonitor
from app.metrics import ServiceMetrics
from app.middleware import REQUEST_ID_HEADER, accept_request_id
from app.one_write import one_write

log = logging.getLogger("nexusai.request")

_ROUTES = {"/health": "/health", "/health/": "/health", "/health/live": "/health/live",
           "/health/live/": "/health/live", "/health/ready": "/health/ready", "/health/ready/": "/health/ready"}
_JSON = (b"content-type", b"application/json")
_LIVE = msgspec.json.encode({"status": "ok"})
_READY = msgspec.json.encode({"status": "ready"})
_encode = msgspec.json.Encoder().encode


class HealthGate:
    """Answers ``GET`` of the health paths from ``monitor``; passes everything else to ``app``.
    ``api_key``: when set, a caller without ``Authorization: Bearer <key>`` sees only ``status``
    on ``/health`` (as the route does)."""

    def __init__(self, app: ASGIApp, monitor: HealthMonitor, api_key: str | None,
                 metrics: ServiceMetrics | None = None) -> None:
        self.app = app
        self.monitor = monitor
        self.key = api_key.encode() if api_key else None
        self.metrics = metrics
        self.answered = 0
        self._answers: dict[str, Callable[[Scope], tuple[int, bytes, list[tuple[bytes, bytes]]]]] = {
            "/health": self._health, "/health/live": self._live, "/health/ready": self._ready}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = answered_here(scope)
        if route is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = scope.get("headers", ())
        request_id = accept_request_id(next((v for k, v in headers if k == REQUEST_ID_HEADER), None))
        status, body, extra = self._answers[route](scope)
        await send({"type": "http.response.start", "status": status, "headers": [
            _JSON, (b"content-length", str(len(body)).encode()), *extra, (REQUEST_ID_HEADER, request_id.encode())]})
        await send({"type": "http.response.body", "body": body})
        self.answered += 1
        seconds = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.observe_request("GET", route, status, seconds)
        duration_ms = round(seconds * 1000, 3)
        log.info("GET %s %s %.1fms request_id=%s", route, status, duration_ms, request_id,
                 extra={"request_id": request_id, "method": "GET", "path": route, "status": status,
                        "duration_ms": duration_ms})

    # -- the three answers: the same bodies as app.health's routes -----------------------------------
    def _health(self, scope: Scope) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        body: dict[str, Any] = {"status": self.monitor.status()}
        if self._authenticated(scope):
            body["ready"] = self.monitor.ready()
            body["components"] = self.monitor.snapshot()
        return 200, _encode(body), []

    def _live(self, scope: Scope) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        return 200, _LIVE, []

    def _ready(self, scope: Scope) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        if self.monitor.ready():
            return 200, _READY, []
        body = _encode({"status": "not_ready", "health": self.monitor.status()})
        return 503, body, [(b"retry-after", str(max(1, round(self.monitor.interval))).encode())]

    def _authenticated(self, scope: Scope) -> bool:
        if self.key is None:
            return True
        value = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
        scheme, _, token = value.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token, self.key)


def answered_here(scope: Scope) -> str | None:
    """The health route ``HealthGate`` answers ``scope`` with itself, or None (the app answers)."""
    route = _ROUTES.get(scope["path"]) if scope["type"] == "http" else None
    if route is None or scope["method"] != "GET" or scope.get("query_string") or _has_origin(scope):
        return None
    return route


def _has_origin(scope: Scope) -> bool:
    return any(k == b"origin" for k, _ in scope.get("headers", ()))


class HealthFirstProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, answering the probes ``HealthGate`` answers (``answered_here``)
    while the request is parsed: their ASGI call runs at once, in a context of its own as a task's
    would, and finishes there (``HealthGate`` awaits nothing but ``send``, which writes straight to
    the socket). Should it wait after all — a paused transport — the rest runs as a task
    (``_Continued``). One probe per read at most: the others, any other request, and a request
    started by the end of another (pipelining) run as tasks, as uvicorn runs them — so a client
    that packs thousands of probes into one read holds the loop no longer than uvicorn would."""

    _in_place = 0  # probes this read may still answer in place (1 while data_received runs, else 0)

    def data_received(self, data: bytes) -> None:
        self._in_place = 1
        try:
            super().data_received(data)
        finally:
            self._in_place = 0

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        if self.transport.is_closing():
            # An answer already closed the connection (HTTP/1.0, an error): what was sent behind
            # it is not run, as uvicorn drops a pipelined request once its connection closes.
            return
        # A request is starting: the connection is not idle. (A probe answered while its bytes
        # were parsed armed the keep-alive timer; a request parsed after it would be cut off.)
        self._unset_keepalive_if_required()
        one_write(cycle)  # its head and first body part in one socket write (app/one_write.py)
        if not self._in_place or self.flow.write_paused or answered_here(cycle.scope) is None:
            super()._start_asgi_task(cycle, app)
            return
        self._in_place = 0  # also keeps a request this answer starts (pipelining) out of this frame
        context = contextvars.Context() if self.config.reset_contextvars else contextvars.copy_context()
        coro = cycle.run_asgi(app)
        try:
            waiting_on = context.run(coro.send, None)
        except StopIteration:
            return
        # (an exception other than StopIteration cannot leave run_asgi: it answers 500 itself)
        task = self.loop.create_task(_Continued(coro, waiting_on).wait(), context=context)
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)


class _Continued:
    """Finishes a coroutine whose first step ran outside any task, as the task would have: the
    outer task waits for what the coroutine waits for, then resumes it (a cancellation is passed in)."""

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self._coro, self._waiting_on = coro, waiting_on

    async def wait(self) -> Any:
        return await self

    def __await__(self) -> Generator[Any, None, Any]:
        waiting_on = self._waiting_on
        while True:
            thrown: BaseException | None = None
            try:
                yield waiting_on
            except GeneratorExit:  # this awaitable is being closed, not resumed: close the coroutine too
                self._coro.close()
                raise
            except BaseException as exc:  # cancelled while waiting: the coroutine decides
                thrown = exc
            try:
                waiting_on = self._coro.send(None) if thrown is None else self._coro.throw(thrown)
            except StopIteration as stop:
                return stop.value
