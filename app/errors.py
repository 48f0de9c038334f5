"""The one table that maps errors to HTTP: a single JSON shape, no stack traces, never a 500
for anything a client sends."""

from __future__ import annotations

import logging
import re

from litestar import Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from app.middleware import CLIENT_CLOSED, DISCONNECTED
from app.schemas import ErrorBody
from domain.errors import (
    Busy, Conflict, DomainError, EmbeddingError, Forbidden, Invalid, NotFound, Unauthorized, Unavailable,
    VectorIndexError,
)
from domain.idempotency import KeyInFlight, KeyReused

log = logging.getLogger("nexusai.errors")

DOMAIN_STATUS: dict[type[DomainError], int] = {
    KeyReused: 422,
    Busy: 503,
    NotFound: 404,
    Unauthorized: 401,
    Forbidden: 403,
    Conflict: 409,
    Invalid: 400,
    Unavailable: 503,
    EmbeddingError: 503,
    VectorIndexError: 503,
}

HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
              409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type", 422: "unprocessable",
              429: "too_many_requests",
              503: "unavailable"}


def error_body(status: int, code: str, message: str, field: str | None = None,
          headers: dict[str, str] | None = None) -> Response[ErrorBody]:
    return Response(ErrorBody(code=code, message=message, field=field, status=status), status_code=status,
                    headers=headers)


def domain_error(_: Request, exc: DomainError) -> Response[ErrorBody]:
    status = next((s for t, s in DOMAIN_STATUS.items() if isinstance(exc, t)), 400)
    # A refusal that passes with time says when to come back, so a client backs off instead of spinning.
    retry_after = exc.retry_after if isinstance(exc, Busy) else 1 if isinstance(exc, KeyInFlight) else None
    headers = None if retry_after is None else {"Retry-After": str(retry_after)}
    return error_body(status, exc.code, exc.message, exc.field, headers)


_MISSING_FIELD = re.compile(r"missing required field `([^`]+)`")
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]+)`")
_NAMED_FIELD = re.compile(r"^(createdAt|expiresAt|since|until|validFrom|validTo|asOf): ")
_MISSING_PARAM = re.compile(r"Missing required \w+ parameter '([^']+)'")


def _camel(key: str) -> str:
    # Path and query keys arrive as Python parameter names; the wire speaks camelCase.
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _field_and_message(key: str | None, message: str) -> tuple[str | None, str]:
    if key == "data":  # the body as a whole: name the field inside it, when there is one
        key = None
        if message == "'data'":  # Litestar's KeyError text when there is no body at all
            return None, "a JSON request body is required"
    unknown = _UNKNOWN_FIELD.search(message)
    if unknown:
        name = f"{key}.{unknown.group(1)}" if key else unknown.group(1)
        return name, f"unknown field {name!r}: the request body allows only the documented fields"
    named = _NAMED_FIELD.match(message)
    if named:
        return named.group(1), message
    missing = _MISSING_FIELD.search(message)
    if missing:
        key = f"{key}.{missing.group(1)}" if key else missing.group(1)
        return key, f"{key} is required"
    if key:
        key = _camel(key)
        return key, message if key in message else f"{key}: {message}"
    return None, message


def validation_error(request: Request, exc: ValidationException) -> Response[ErrorBody]:
    extra = exc.extra if isinstance(exc.extra, list) else []
    if extra and isinstance(extra[0], dict) and str(extra[0].get("source")) in ("path", "ParamType.PATH") \
            and str(extra[0].get("message", "")).startswith("Expected `int`, got"):
        # Ids are ASCII digits only ("+1", "1_0", "٣" are not ids): such a path names no record.
        return error_body(404, "not_found", f"no such resource: {request.url.path}")
    if extra and isinstance(extra[0], dict) and extra[0].get("exact"):  # app.routes.strict named it already
        field, message = extra[0]["key"], str(extra[0]["message"])
    elif extra and isinstance(extra[0], dict):
        field, message = _field_and_message(extra[0].get("key") or None, str(extra[0].get("message") or exc.detail))
    else:
        missing = _MISSING_PARAM.search(str(exc.detail))
        field = missing.group(1) if missing else None
        message = f"{field} is required" if field else str(exc.detail)
    return error_body(400, "validation_error", message, field)


def http_error(request: Request, exc: HTTPException) -> Response[ErrorBody]:
    status = exc.status_code
    if request.scope.get(DISCONNECTED):
        # The client hung up mid-upload: its doing, and nobody will read this answer.
        log.info("client disconnected before its request was read: %s %s", request.method, request.url.path)
        return error_body(CLIENT_CLOSED, "client_closed_request", "the client closed the connection")
    if status >= 500:
        log.error("server error %s: %s", status, exc.detail)
        return error_body(status, "internal_error", "the server failed to handle the request")
    if status == 400 and isinstance(exc.__cause__, SerializationException):
        return error_body(400, "malformed_json", f"malformed JSON body: {exc.detail}")
    # Headers the exception carries (Allow on a 405, WWW-Authenticate, Retry-After) go out with it.
    headers = exc.headers or None
    if status == 405 and headers:
        headers = {k: _with_head(v) if k.lower() == "allow" else v for k, v in headers.items()}
    return error_body(status, HTTP_CODES.get(status, "client_error"), str(exc.detail), headers=headers)


def _with_head(allow: str) -> str:
    """Where GET is allowed HEAD is too (app.head_requests answers it)."""
    methods = [m.strip() for m in allow.split(",")]
    return ", ".join([*methods, "HEAD"]) if "GET" in methods and "HEAD" not in methods else allow


def too_deep(request: Request, exc: RecursionError) -> Response[ErrorBody]:
    # msgspec (and json) give up on very deep nesting with RecursionError, which Litestar does
    # not turn into a 400; only a client's document nests that deep.
    log.warning("nesting too deep on %s %s", request.method, request.url.path)
    return error_body(400, "malformed_json", "malformed JSON body: nested too deeply")


def unexpected_error(request: Request, exc: Exception) -> Response[ErrorBody]:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_body(HTTP_500_INTERNAL_SERVER_ERROR, "internal_error", "the server failed to handle the request")


EXCEPTION_HANDLERS = {
    DomainError: domain_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    RecursionError: too_deep,
    Exception: unexpected_error,
}
