"""Request ids, one log line per request, and request metrics.

``RequestObserver`` wraps the whole Litestar ASGI handler rather than sitting in Litestar's
per-route middleware stack: it must see requests that match no route (404/405) and the final
status of every response, after the exception handlers have turned errors into bodies. The
router fills ``scope["path_template"]`` in the same scope dict, so the route template is known
by the time the response starts.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from contextvars import ContextVar

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from app.metrics import UNMATCHED_ROUTE, ServiceMetrics

log = logging.getLogger("nexusai.request")

REQUEST_ID_HEADER = b"x-request-id"
MAX_REQUEST_ID = 128
# Printable ASCII without spaces: safe to echo in a header and to put into a log line.
_SANE_ID = re.compile(rf"[\x21-\x7e]{{1,{MAX_REQUEST_ID}}}")

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)


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
    return uuid.uuid4().hex


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

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != REQUEST_ID_HEADER]
                headers.append((REQUEST_ID_HEADER, request_id.encode("ascii")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except BaseException:
            log.exception("request %s failed before answering", request_id,
                          extra={"request_id": request_id, "method": scope.get("method"),
                                 "path": scope.get("path_template") or UNMATCHED_ROUTE})
            raise
        finally:
            seconds = time.perf_counter() - started
            route = scope.get("path_template") or UNMATCHED_ROUTE
            method = scope.get("method", "")
            if self.metrics is not None:
                self.metrics.observe_request(method, route, status, seconds)
            duration_ms = round(seconds * 1000, 3)
            level = logging.ERROR if status >= 500 else logging.INFO
            log.log(level, "%s %s %s %.1fms request_id=%s", method, route, status, duration_ms, request_id,
                    extra={"request_id": request_id, "method": method, "path": route, "status": status,
                           "duration_ms": duration_ms})
            request_id_var.reset(token)
