"""What every request passes besides its handler, as one Litestar middleware and two hooks.

``RequestGates`` (Litestar middleware, so it runs once the router has found the route) assigns the
request id, then checks the API key and the body's media type, then admits the request under
admission control (``app.overload``), then passes it through the route's door
(``app.auth.KeyAuthentication``: what the key may do there, and on the write routes
``Idempotency-Key``). One middleware rather than six: each layer costs a call and a closure per
request, and these checks read the same headers.

``observe`` (Litestar's ``before_send`` hook) sees every response message the app sends, routed or
not: it echoes the request id in ``X-Request-ID`` and, when the body is complete, writes the one
log line per request and feeds the metrics. A request the router found no route for (404/405)
never reaches the middleware; its id is assigned when its answer starts.

``unrouted`` is the exception handler of the router's 404 and 405: with ``MEMORY_API_KEY`` set a
caller without the key gets 401 on every path, so it learns nothing about which routes or methods
exist; and a HEAD where GET is allowed is answered as the GET (``app.head_requests``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Collection
from typing import Any

from litestar import Request, Response
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, MethodNotAllowedException
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from app.auth import RESOLVED, Authenticator, Denied, KeyAuthentication, bearer_token, send_denied
from app.errors import error_body, http_error
from app.head_requests import answer_head_as_get
from app.metrics import UNMATCHED_ROUTE, ServiceMetrics
from app.middleware import (
    CLIENT_CLOSED, DISCONNECTED, REFUSED, REQUEST_ID_HEADER, AdmissionControl, accept_request_id, header,
    is_open_path, request_id_var, send_error,
)
from domain.errors import DomainError

log = logging.getLogger("nexusai.request")

OBSERVED = "nexusai.observed"  # scope key: the request's ``_Observed``
_JSON_TYPE = re.compile(rb"^\s*application/(?:[\w.+-]+\+)?json\s*(?:;.*)?$", re.IGNORECASE)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_UNAUTHORIZED = "a valid 'Authorization: Bearer <MEMORY_API_KEY>' header is required"
_CHALLENGE = (b"www-authenticate", b'Bearer realm="memory"')


class _Observed:
    """One request as the log and the metrics see it."""

    __slots__ = ("request_id", "started", "route", "status", "done")

    def __init__(self, scope: Scope) -> None:
        self.request_id = accept_request_id(header(scope, REQUEST_ID_HEADER))
        self.started = time.perf_counter()
        self.route: str = scope.get("path_template") or UNMATCHED_ROUTE  # type: ignore[assignment]
        self.status = 500  # what the client sees if the app dies before answering
        self.done = False


def observed(scope: Scope) -> _Observed:
    """The request's ``_Observed``, made on first sight."""
    found = scope.get(OBSERVED)
    if found is None:
        found = scope[OBSERVED] = _Observed(scope)  # type: ignore[literal-required]
    return found  # type: ignore[return-value]


class RequestGates(ASGIMiddleware):
    """Request id, API key, JSON bodies only, admission control (see the module).

    ``open_paths`` (health, docs) pass without the key, marked ``scope["authenticated"]`` so they
    can hide details. Only HTTP: the mounted MCP app's requests are HTTP too, and pass the same gates."""

    scopes = (ScopeType.HTTP,)

    def __init__(self, *, authenticator: Authenticator, door: KeyAuthentication, open_paths: Collection[str],
                 admission: AdmissionControl, metrics: ServiceMetrics | None, cors: bool = False) -> None:
        self.authenticator = authenticator
        self.door = door
        self.open_paths = frozenset(open_paths)
        self.admission = admission
        self.metrics = metrics
        self.cors = cors

    def _open(self, scope: Scope) -> bool:
        if is_open_path(scope["path"], self.open_paths) or (scope.get("path_template") or "") in self.open_paths:
            return True
        # A CORS preflight carries no key: the CORS layer answers it.
        return self.cors and scope["method"] == "OPTIONS" and header(scope, b"access-control-request-method") \
            is not None

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        request = observed(scope)
        request.route = scope.get("path_template") or UNMATCHED_ROUTE  # type: ignore[assignment]
        token = request_id_var.set(request.request_id)
        answered_by_handlers = False

        async def receive_watching() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                scope[DISCONNECTED] = True  # type: ignore[literal-required]
            return message

        try:
            if not self._open(scope):
                # Resolved once here, before the body is judged: a caller without a key learns nothing
                # else. What the principal may do on this route is for KeyAuthentication (app.auth).
                try:
                    scope[RESOLVED] = await self.authenticator.principal(bearer_token(scope))  # type: ignore[literal-required]
                except Denied as denied:
                    await send_denied(send, denied)
                    return
            if scope["method"] in _BODY_METHODS and (refused := _not_json(scope)) is not None:
                await send_error(send, 415, "unsupported_media_type", refused)
                return
            door = self.door.handle

            async def through_door(scope: Scope, receive: Receive, send: Send) -> None:
                await door(scope, receive, send, next_app)

            await self.admission.admit(scope, receive_watching, send, through_door)
        except (DomainError, HTTPException):
            # A refusal raised by a step here (Idempotency-Key: 400, 409, 413, 422): the app's
            # exception handlers answer it, and ``observe`` logs and counts that answer.
            answered_by_handlers = True
            raise
        except BaseException:
            if not request.done and not scope.get(DISCONNECTED):
                log.exception("request %s failed before answering", request.request_id,
                              extra={"request_id": request.request_id, "method": scope.get("method"),
                                     "path": request.route})
            raise
        finally:
            if not request.done and not answered_by_handlers and not scope.get(REFUSED):  # no answer went out: counted here
                _finish(scope, request, self.metrics)
            request_id_var.reset(token)

    def unrouted(self, request: Request, exc: HTTPException) -> Response[Any]:
        """The exception handler of the router's 404 and 405 (see the module)."""
        if "route_handler" not in request.scope and not self._open(request.scope) \
                and not self.authenticator.recognizes(bearer_token(request.scope)):
            return error_body(401, "unauthorized", _UNAUTHORIZED, headers={"www-authenticate": _CHALLENGE[1].decode()})
        if isinstance(exc, MethodNotAllowedException) and request.method == "HEAD":
            allowed = (exc.headers or {}).get("allow", "")
            if "GET" in (m.strip() for m in allowed.split(",")):
                observed(request.scope)  # the GET answering it carries the same request id
                return answer_head_as_get(request)
        return http_error(request, exc)


def _not_json(scope: Scope) -> str | None:
    """Why a request that carries a body is refused (415), or None: bodies must be JSON.

    A web page can send a cross-origin "simple" request (text/plain, a form) without a CORS
    preflight; refusing every other media type means such a request can never write."""
    content_type = header(scope, b"content-type")
    has_body = content_type is not None or (header(scope, b"content-length") or b"0").strip() not in (b"0", b"") \
        or header(scope, b"transfer-encoding") is not None
    if has_body and (content_type is None or not _JSON_TYPE.match(content_type)):
        shown = (content_type or b"none").decode("latin-1")[:100]
        return f"request bodies must be JSON (Content-Type: application/json), got {shown!r}"
    return None


def observer(metrics: ServiceMetrics | None):
    """The ``before_send`` hook: request id header, then the log line and metrics (see the module)."""

    async def observe(message: Message, scope: Scope) -> None:
        if scope.get(REFUSED) or scope["type"] != "http":
            return
        request = observed(scope)
        if message["type"] == "http.response.start":
            request.status = message["status"]
            message["headers"] = [*message.get("headers", ()), (REQUEST_ID_HEADER, request.request_id.encode())]
        elif message["type"] == "http.response.body" and not message.get("more_body") and not request.done:
            _finish(scope, request, metrics)

    return observe


def _finish(scope: Scope, request: _Observed, metrics: ServiceMetrics | None) -> None:
    request.done = True
    seconds = time.perf_counter() - request.started
    status, method, route = request.status, scope.get("method", ""), request.route
    if scope.get(DISCONNECTED) and status >= 500:
        status = CLIENT_CLOSED  # the answer (if any) reached nobody; the client's doing
    if metrics is not None:
        metrics.observe_request(method, route, status, seconds)
    level = logging.ERROR if status >= 500 else logging.INFO
    if log.isEnabledFor(level):  # the fields are built only for a line that is written
        duration_ms = round(seconds * 1000, 3)
        log.log(level, "%s %s %s %.1fms request_id=%s", method, route, status, duration_ms, request.request_id,
                extra={"request_id": request.request_id, "method": method, "path": route, "status": status,
                       "duration_ms": duration_ms})
