"""Strict input on every route, derived once per route handler from what it declares.

Litestar (on its own) ignores query parameters a handler does not declare, takes the last of a
repeated one, converts query numbers with msgspec's lax rules (``limit=1e3`` is 1000, ``5.0`` is 5)
and converts JSON bodies laxly too (``{"sessionId": "2"}`` is session 2). A caller's typo then looks
understood. ``strict_input`` is a guard (guards run before Litestar parses any parameter): it
answers 400 naming the parameter for an undeclared or repeated query parameter and for a number
not written as plain ASCII decimal digits, and it decodes a JSON body strictly into the handler's
body type (no numbers in strings, no unknown fields). The decoded body is left where
``Request.json()`` finds it, so the body is decoded once, not twice.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from typing import Any

import msgspec
from litestar.connection import ASGIConnection
from litestar.exceptions import NotFoundException, ValidationException
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.utils.scope.state import ScopeState

# No "+", no leading zeros, no "-0", no exponent; a "-" is let through so "-1" stays a 400 (out of range).
_INTEGER = re.compile(r"0|-?[1-9][0-9]*")
_NUMBER = re.compile(r"(?:0|-?[1-9][0-9]*)(?:\.[0-9]+)?|-0\.[0-9]+")
_ID_EXEMPT = frozenset({"external_id", "user_id"})  # path parameters named *_id that are not numbers


@dataclass(frozen=True, slots=True)
class _Declared:
    """What one route handler accepts: its query parameters (wire name -> number pattern or None),
    the ones that may repeat, and a strict decoder of its JSON body (None: no body)."""

    query: dict[str, re.Pattern[str] | None]
    repeatable: frozenset[str]
    body: msgspec.json.Decoder | None


_KEY = "nexusai.strict"  # where a handler keeps its _Declared: in its own ``opt`` (not a dict by id: ids are reused)


def _number_pattern(annotation: Any) -> re.Pattern[str] | None:
    """``_INTEGER`` for an int parameter (optional or not), ``_NUMBER`` for a float one."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    args = set(typing.get_args(annotation)) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else {annotation}
    args = {typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in args}  # Offset | None
    args.discard(type(None))
    if args == {int}:
        return _INTEGER
    if args <= {int, float} and float in args:
        return _NUMBER
    return None


def declared_input(handler: HTTPRouteHandler, path_params: Any) -> _Declared:
    found = handler.opt.get(_KEY)
    if found is None:
        model = handler.create_kwargs_model(path_parameters=dict.fromkeys(path_params))
        params = handler.parsed_fn_signature.parameters
        query = {p.field_alias: _number_pattern(params[p.field_name].annotation) for p in model.expected_query_params}
        repeatable = frozenset(model.sequence_query_parameter_names)
        data = handler.parsed_data_field
        body = msgspec.json.Decoder(data.annotation, strict=True) if data is not None else None
        found = handler.opt[_KEY] = _Declared(query, repeatable, body)
    return found


def _invalid(field: str | None, message: str, source: str = "query") -> ValidationException:
    # "exact": the field is already the wire name (app.errors passes it through unchanged).
    return ValidationException(detail=message, extra=[{"key": field, "message": message, "source": source,
                                                       "exact": True}])


def check_path_ids(connection: ASGIConnection) -> None:
    """A path id is ASCII digits (a leading "-" is left to the range check). Converting the path text to an ``int``
    alone would take "1.0" and "1e0" as 1, so ``DELETE /sessions/1e0`` would delete session 1."""
    for name, value in connection.path_params.items():
        if name.endswith("_id") and name not in _ID_EXEMPT and not (isinstance(value, str) and _INTEGER.fullmatch(value)):
            raise NotFoundException(f"no such resource: {connection.url.path}")


def check_query(connection: ASGIConnection, declared: _Declared) -> None:
    for name, values in connection.query_params.dict().items():
        if name not in declared.query:
            allowed = ", ".join(sorted(declared.query)) or "none"
            raise _invalid(name, f"{name}: unknown query parameter (this route takes: {allowed})")
        if len(values) > 1 and name not in declared.repeatable:
            raise _invalid(name, f"{name}: given {len(values)} times; it takes one value")
        pattern = declared.query[name]
        if pattern is not None and not all(pattern.fullmatch(v) for v in values):
            kind = "an integer" if pattern is _INTEGER else "a number"
            raise _invalid(name, f"{name}: must be {kind} in plain decimal digits, not {values[0][:40]!r}")


_AT = re.compile(r"^(.*) - at `\$(.*)`$", re.DOTALL)
_NAMED = re.compile(r"^([A-Za-z]+): ")


def body_error(exc: msgspec.ValidationError) -> ValidationException:
    """A strict decode's error as the 400 of every other body error: the field is the JSON path
    (``sessionId``, ``episodes[0].sessionId``, ``filter.metadata``)."""
    message = str(exc)
    at = _AT.match(message)
    path = at.group(2).lstrip(".") if at else ""
    text = at.group(1) if at else message
    unknown = re.search(r"unknown field `([^`]+)`", text)
    if unknown:
        field = f"{path}.{unknown.group(1)}" if path else unknown.group(1)
        return _invalid(field, f"unknown field {field!r}: the request body allows only the documented fields", "body")
    if text.startswith("Object missing required field"):
        missing = re.search(r"`([^`]+)`", text)
        field = f"{path}.{missing.group(1)}" if path and missing else (missing.group(1) if missing else path)
        return _invalid(field, f"{field} is required", "body")
    named = _NAMED.match(text)  # a __post_init__ check (date-times) names its field itself
    if named:
        field = f"{path}.{named.group(1)}" if path else named.group(1)
        return _invalid(field, text, "body")
    if not path:
        return _invalid(None, text, "body")
    return _invalid(path, text if text.startswith(f"{path}: ") else f"{path}: {text}", "body")


async def strict_input(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """The guard of every route: path ids, query parameters, then the JSON body (see the module)."""
    check_path_ids(connection)
    handler = connection.route_handler  # the guard is handed a copy, made per request: no key for a cache
    if not isinstance(handler, HTTPRouteHandler) or connection.scope.get("method") == "OPTIONS":
        # OPTIONS (Litestar's own handler) answers for the path whatever the query: a preflight carries the real one.
        return
    declared = declared_input(handler, connection.path_params)
    if connection.scope["query_string"]:  # most requests have none: no query map to build
        check_query(connection, declared)
    if declared.body is None:
        return
    raw = await connection.body()  # type: ignore[attr-defined]
    if not raw:
        return  # Litestar answers the missing body itself ("a JSON request body is required")
    try:
        value = declared.body.decode(raw)
    except msgspec.ValidationError as exc:
        try:  # a typed decode can stop at a wrong type before it reaches a syntax error ("[1,")
            msgspec.json.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return  # Litestar's own decode answers it: malformed JSON
        raise body_error(exc) from None
    except (msgspec.DecodeError, RecursionError):
        return  # Litestar's own decode answers malformed JSON (and too-deep nesting) as before
    ScopeState.from_scope(connection.scope).json = value
