"""``Idempotency-Key`` on the write routes: a retried write is answered from the store, not written twice.

Two parts, both through Litestar's public API:

- ``keyed_write`` (a step of the request gates, ``app.auth``, on the controllers whose ``opt`` is
  ``idempotent()``): for a POST, PATCH or DELETE with the header it checks the key, hashes the request (method, path and query,
  body, caller), and then either replays the stored answer (``Idempotent-Replayed: true``), refuses
  a key reused for another request (422), waits for a request with the same key that is still
  running in this process (409 after ``IN_FLIGHT_WAIT`` seconds), or hands the request on with a
  pending ``Claim`` (``domain.idempotency``).
- ``answered`` (called by each write handler): gives the claim the handler's own rendering of the
  result, so the write unit stores exactly the bytes the client is sent in the same transaction
  as the write, and sends those bytes. A unit that finds the key already answered (another
  process won the race) is rolled back and its answer replayed.

A write that fails (400, 404, 409...) stores nothing: nothing was written, so a retry is a new
attempt. Keys expire after ``IDEMPOTENCY_KEY_SECONDS`` and are swept with expired records.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from litestar import Request, Response
from litestar.serialization import encode_json
from litestar.types import ASGIApp, Receive, Scope, Send

from app.auth import request_principal
from app.middleware import header
from domain.access import Principal
from domain.idempotency import (
    AlreadyAnswered, Answer, Claim, KeyedAnswer, KeyInFlight, check_key, expiry_after, fingerprint, pending, replay_of,
)
from domain.errors import Invalid
from domain.models import utc_now

T = TypeVar("T")

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
WRITE_METHODS = frozenset({"POST", "PATCH", "DELETE", "PUT"})
IN_FLIGHT_WAIT = 10.0  # seconds a retry waits for the first request with its key before a 409
_RAW_HEADER = HEADER.lower().encode()
IDEMPOTENT = "nexusai.idempotent"  # a handler's opt key: its writes take the header
UNKEYED = "nexusai.unkeyed"  # a handler's opt key: why it refuses the header (a 400 naming it)
_TOOL_KEY = "idempotency_key"  # the MCP write tools' argument
_IN_FLIGHT = "idempotency_in_flight"  # app.state: (caller, key) -> set when that request has answered


def caller_of(principal: Principal | None) -> str:
    """Whose key space a request's key lives in: one caller's key never answers another's request.
    The caller is the API key the request was made with (``key:<id>``, ``key:admin`` for
    ``MEMORY_API_KEY``), or ``anonymous`` on a service without keys."""
    if principal is None or not principal.authenticated:
        return "anonymous"
    return principal.actor


def replay(found: KeyedAnswer) -> Response:
    """The stored answer, byte for byte, marked as a replay."""
    return Response(content=found.body, status_code=found.status, media_type="application/json",
                    headers={HEADER: found.key, REPLAYED: "true"})


def _first(found: KeyedAnswer) -> Response:
    return Response(content=found.body, status_code=found.status, media_type="application/json",
                    headers={HEADER: found.key})


async def answered(write: Callable[[], Awaitable[T]], out: Callable[[T], Any], status: int | Callable[[T], int]) -> Any:
    """Run ``write`` and answer ``out(result)`` with ``status`` (a number, or a function of the
    result for an upsert's 201/200). Under a pending claim the rendered answer is stored with the
    write and sent as stored; without one this is the plain handler. A delete handler that returns
    this is still annotated ``-> None``: the annotation is what the OpenAPI schema documents, and a
    204 carries no body."""
    status_of = status if callable(status) else (lambda _result: status)
    claim = pending.get()
    if claim is None:
        result = await write()
        body = out(result)
        # A fixed status with a body is the decorator's: the plain value keeps Litestar's own encoding.
        return Response(body, status_code=status_of(result)) if callable(status) or body is None else body

    def render(result: T) -> Answer:
        body = out(result)
        return Answer(status_of(result), b"" if body is None else encode_json(body))

    claim.render = render
    try:
        result = await write()
    except AlreadyAnswered as exc:
        return replay(replay_of(exc.found, claim.fingerprint))
    finally:
        pending.set(None)
    if claim.stored is None:  # the handler wrote nothing through a unit: a plain answer
        return Response(out(result), status_code=status_of(result))
    return _first(claim.stored)


async def keyed_write(scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> bool:
    """Replays, refuses or claims a keyed write before its handler runs (see the module docstring);
    False, having done nothing, for a request that is not a write with the header on a route marked
    ``idempotent()``. Called by ``app.auth.KeyAuthentication`` once the caller is known."""
    if scope["method"] not in WRITE_METHODS:
        return False
    handler: Any = scope.get("route_handler")
    if handler is None:
        return False
    refusal = handler.opt.get(UNKEYED)
    if refusal is None and not handler.opt.get(IDEMPOTENT):
        return False
    raw = header(scope, _RAW_HEADER)
    if raw is None:
        return False
    if refusal is not None:  # silently ignoring the key would let a retry write twice
        raise Invalid(refusal, field=HEADER)
    key = check_key(raw.decode("latin-1"))
    request: Request = Request(scope, receive)
    container = request.app.state["container"]
    caller = caller_of(request_principal.get())
    query = scope.get("query_string", b"").decode("latin-1")
    path = scope["path"] + ("?" + query if query else "")
    wanted = fingerprint(scope["method"], path, await request.body(), caller)
    in_flight: dict[tuple[str, str], asyncio.Event] = request.app.state.setdefault(_IN_FLIGHT, {})
    slot = (caller, key)
    while slot in in_flight:
        try:
            await asyncio.wait_for(in_flight[slot].wait(), IN_FLIGHT_WAIT)
        except TimeoutError:
            raise KeyInFlight(f"a request with Idempotency-Key {key!r} is still running; retry later",
                              field=HEADER) from None
    found = await container.store().idempotency.get(caller, key, utc_now())
    if found is not None:
        response = replay(replay_of(found, wanted))
        await response.to_asgi_response(request.app, request)(scope, receive, send)
        return True
    done = in_flight[slot] = asyncio.Event()
    seconds = container.settings().idempotency_key_seconds
    token = pending.set(Claim(caller, key, wanted, expiry_after(seconds)))
    try:
        await next_app(scope, receive, send)
    finally:
        pending.reset(token)
        if in_flight.get(slot) is done:  # a later request may hold the slot by now
            del in_flight[slot]
        done.set()
    return True


def nothing(_result: object) -> None:
    """The body of a 204: none."""
    return None


def created_or_updated(result: Any) -> int:
    """An upsert's status: 201 when it created the record, 200 when it updated one."""
    return 201 if result.created else 200


def idempotent() -> dict[str, Any]:
    """The ``opt`` of a controller whose writes take ``Idempotency-Key`` (``keyed_write`` reads it)."""
    return {IDEMPOTENT: True}


def unkeyed(why: str) -> dict[str, Any]:
    """The ``opt`` of a write whose answer must not be stored for a replay: a request with
    ``Idempotency-Key`` is a 400 saying ``why``, rather than a key that is silently not kept."""
    return {UNKEYED: why}


async def keyed_result(container: Any, key: str | None, tool: str, arguments: dict[str, Any],
                       write: Callable[[], Awaitable[T]], render: Callable[[T], dict[str, Any]],
                       principal: Principal | None = None) -> dict[str, Any]:
    """An MCP write tool's answer under ``key`` (its ``idempotency_key`` argument): as ``answered``
    for HTTP — the result stored with the write, a repeated call answered from the store (with
    ``replayed: true``), the key with other arguments refused; keys live in the calling API key's
    space, as over HTTP (``principal``: the tool call's)."""
    if key is None:
        return render(await write())
    check_key(key, _TOOL_KEY)
    caller = caller_of(principal)
    wanted = fingerprint("MCP", tool, json.dumps(arguments, sort_keys=True, default=str).encode(), caller)
    found = await container.store().idempotency.get(caller, key, utc_now())
    if found is not None:
        return {**json.loads(replay_of(found, wanted, _TOOL_KEY).body), "replayed": True}
    claim = Claim(caller, key, wanted, expiry_after(container.settings().idempotency_key_seconds),
                  render=lambda result: Answer(200, json.dumps(render(result)).encode()))
    token = pending.set(claim)
    try:
        result = await write()
    except AlreadyAnswered as exc:
        return {**json.loads(replay_of(exc.found, wanted, _TOOL_KEY).body), "replayed": True}
    finally:
        pending.reset(token)
    return json.loads(claim.stored.body) if claim.stored is not None else render(result)
