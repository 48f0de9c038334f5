"""The hottest requests in their plainest form, answered without Litestar's per-request machinery.

``GET /episodes/{id}``, ``GET /episodes/search``, ``GET /sessions/{id}/episodes`` and
``POST /episodes`` are most of what an assistant asks for. Through Litestar each pays for routing,
a ``Request``, the signature model, dependency resolution, the before/after hooks, a ``Response``
and its ASGI wrapper: about half of the CPU of a lookup by id and a third of a worker's CPU for a
POST (py-spy of the peer bench, round 8), more than the handler itself. ``HotRoutes`` sits inside
every gate (health, admission, request id and log, API key, HEAD, JSON bodies only) and in front
of Litestar's router. A request it can read at a glance — one of those paths exactly, ids and
numbers in plain digits within their ranges, only the parameters the route declares, each once,
a body that decodes strictly into the route's body type, no ``Origin`` (CORS) and no ``X-Actor``
header — it answers itself by calling the route's own handler function (the controller method,
so the answer is built by the same code) and encoding the result with the route's own serializer:
the same status, headers and bytes Litestar would send. After a write it runs what Litestar's
``after_response`` runs (wake the embedding worker and the change feed). Everything else goes to
Litestar untouched (a body read here is handed on as it came), and so does a request whose
handler raises (a 404, a 400 from the service, a 503): the failure rides with it (``HOT_FAILURE``),
and Litestar's before-request hook raises it once Litestar's own checks have passed, so Litestar
answers it with the service's error shape without calling the service again. A POST handler that
raises has committed nothing (a write fails before its commit or with it), and one that returned is
never run again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from litestar import Litestar
from litestar._asgi.utils import is_valid_host
from litestar._parsers import parse_query_string
from litestar.serialization import encode_json, get_serializer
from litestar.types import ASGIApp, Receive, Scope, Send

from app.middleware import buffered_body
from app.routes.strict import declared_input

from domain.limits import MAX_ID, MAX_KEYWORD_QUERY, MAX_LIMIT, MAX_OFFSET

_DIGITS = re.compile(r"[1-9][0-9]{0,18}")
_COUNT = re.compile(r"0|[1-9][0-9]{0,18}")
_SKIP_HEADERS = frozenset({b"origin", b"x-actor"})  # CORS answers and the actor check stay Litestar's
_JSON = (b"content-type", b"application/json")
_CREATE = "/episodes"  # the path of POST /episodes
# Where a handler's failure rides to Litestar with the request: its before-request hook raises it once
# the request has passed Litestar's own checks, so the service is not called a second time.
HOT_FAILURE = "nexusai.hot_failure"


def _int_within(low: int, high: int) -> Callable[[str], int | None]:
    def read(text: str) -> int | None:
        if not _COUNT.fullmatch(text):
            return None
        value = int(text)
        return value if low <= value <= high else None
    return read


def _text_within(low: int, high: int) -> Callable[[str], str | None]:
    return lambda text: text if low <= len(text) <= high else None


def _one_of(*choices: str) -> Callable[[str], str | None]:
    allowed = frozenset(choices)
    return lambda text: text if text in allowed else None


@dataclass(frozen=True, slots=True)
class _Route:
    """One hot route: its handler's parameters from the query (wire name -> (keyword, reader)),
    the keyword its path id goes to, and what Litestar would take from the route."""

    template: str  # Litestar's route path, e.g. "/episodes/{episode_id:str}"
    path_id: str | None
    query: dict[str, tuple[str, Callable[[str], Any]]]
    required: frozenset[str] = frozenset()


_ROUTES = {
    "search": _Route("/episodes/search", None, {
        "q": ("q", _text_within(1, MAX_KEYWORD_QUERY)),
        "limit": ("limit", _int_within(1, MAX_LIMIT)),
        "sessionId": ("session_id", _int_within(1, MAX_ID)),
        "match": ("match", _one_of("all", "any", "fts")),
    }, frozenset({"q"})),
    "episode": _Route("/episodes/{episode_id:str}", "episode_id", {}),
    "session_episodes": _Route("/sessions/{session_id:str}/episodes", "session_id", {
        "limit": ("limit", _int_within(1, MAX_LIMIT)),
        "offset": ("offset", _int_within(0, MAX_OFFSET)),
    }),
}


@dataclass(frozen=True, slots=True)
class _Bound:
    route: _Route
    handler: Callable[..., Any]  # the controller method, bound
    services: dict[str, Callable[[], Any]]  # the handler's dependencies: keyword -> provider
    serializer: Callable[[Any], Any]
    path_template: str  # what Litestar's router puts in the scope (the request log and metrics read it)


def _bind(route: Any, method: str, spec: _Route, taken: set[str | None]) -> _Bound:
    """``spec`` bound to the handler of ``method`` on ``route``: the parameters not ``taken`` from
    the request are its dependencies (the services; their providers take no arguments)."""
    handler = route.route_handler_map[method][0]
    dependencies = handler.resolve_dependencies()
    services = {key: dependencies[key].dependency for key in set(handler.parsed_fn_signature.parameters) - taken}
    return _Bound(spec, handler.fn, services, get_serializer(handler.resolve_type_encoders()), route.path_format)


class HotRoutes:
    """ASGI wrapper around Litestar's router; see the module."""

    def __init__(self, app: ASGIApp, litestar: Litestar, *, max_body: int,
                 after_write: Callable[[], None] = lambda: None) -> None:
        self.app = app
        self._bound: dict[str, _Bound] = {}
        self._max_body = max_body
        self._after_write = after_write
        routes = {route.path: route for route in litestar.routes}
        for name, spec in _ROUTES.items():
            taken = {spec.path_id} | {keyword for keyword, _ in spec.query.values()}
            self._bound[name] = _bind(routes[spec.template], "GET", spec, taken)
        self._create = _bind(routes[_CREATE], "POST", _Route(_CREATE, None, {}), {"data"})
        handler = routes[_CREATE].route_handler_map["POST"][0]  # type: ignore[union-attr]
        self._create_body = declared_input(handler, {}).body
        self._create_status = handler.status_code

    def _match(self, path: str) -> tuple[_Bound, int | None] | None:
        parts = path.split("/")  # "/episodes/5" -> ["", "episodes", "5"]
        if len(parts) == 3 and parts[1] == "episodes":
            if parts[2] == "search":
                return self._bound["search"], None
            if _DIGITS.fullmatch(parts[2]) and int(parts[2]) <= MAX_ID:
                return self._bound["episode"], int(parts[2])
        elif len(parts) == 4 and parts[1] == "sessions" and parts[3] == "episodes":
            if _DIGITS.fullmatch(parts[2]) and int(parts[2]) <= MAX_ID:
                return self._bound["session_episodes"], int(parts[2])
        return None

    def _arguments(self, bound: _Bound, path_id: int | None, query_string: bytes) -> dict[str, Any] | None:
        """The handler's keyword arguments, or None when the request is not plain (Litestar judges it)."""
        route = bound.route
        kwargs: dict[str, Any] = {} if route.path_id is None else {route.path_id: path_id}
        seen: set[str] = set()
        for name, text in parse_query_string(query_string) if query_string else ():
            known = route.query.get(name)
            if known is None or name in seen:
                return None
            value = known[1](text)
            if value is None:
                return None
            seen.add(name)
            kwargs[known[0]] = value
        if not route.required <= seen:
            return None
        for key, provide in bound.services.items():
            kwargs[key] = provide()
        return kwargs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("root_path") or not self._plain_headers(scope):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "POST" and scope["path"] == _CREATE and not scope["query_string"]:
            await self._create_episode(scope, receive, send)
            return
        found = self._match(scope["path"]) if scope["method"] == "GET" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        bound, path_id = found
        kwargs = self._arguments(bound, path_id, scope["query_string"])
        if kwargs is None:
            await self.app(scope, receive, send)
            return
        try:
            body = encode_json(await bound.handler(**kwargs), bound.serializer)
        except Exception as exc:  # an error: Litestar answers it (HOT_FAILURE), with its own checks first
            scope[HOT_FAILURE] = exc  # type: ignore[literal-required]
            await self.app(scope, receive, send)
            return
        await self._answer(scope, send, bound, 200, body)

    @staticmethod
    def _plain_headers(scope: Scope) -> bool:
        return not any(key in _SKIP_HEADERS or (key == b"host" and not is_valid_host(value))
                       for key, value in scope["headers"])

    async def _create_episode(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw, receive = await buffered_body(receive, self._max_body)  # handed on as it came
        kwargs: dict[str, Any] = {}
        try:
            if raw is None or self._create_body is None:
                raise ValueError("not a plain body")
            kwargs["data"] = self._create_body.decode(raw)
            kwargs.update((key, provide()) for key, provide in self._create.services.items())
            created = await self._create.handler(**kwargs)
        except Exception as exc:  # nothing was committed: Litestar judges the request and answers it
            if "data" in kwargs:  # the service refused it: Litestar answers that, not asking again
                scope[HOT_FAILURE] = exc  # type: ignore[literal-required]
            await self.app(scope, receive, send)
            return
        # Committed: from here on it is answered here, whatever happens.
        await self._answer(scope, send, self._create, self._create_status,
                           encode_json(created, self._create.serializer))
        self._after_write()

    @staticmethod
    async def _answer(scope: Scope, send: Send, bound: _Bound, status: int, body: bytes) -> None:
        scope["path_template"] = bound.path_template  # type: ignore[typeddict-unknown-key]
        await send({"type": "http.response.start", "status": status,
                    "headers": [_JSON, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
