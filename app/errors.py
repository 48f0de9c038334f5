"""The one table that maps errors to HTTP: a single JSON shape, no stack traces, never a 500
for anything a client sends."""

from __future__ import annotations

import logging

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from app.schemas import ErrorBody
from domain.errors import Conflict, DomainError, EmbeddingError, Invalid, NotFound, Unavailable, VectorIndexError

log = logging.getLogger("nexusai.errors")

DOMAIN_STATUS: dict[type[DomainError], int] = {
    NotFound: 404,
    Conflict: 409,
    Invalid: 400,
    Unavailable: 503,
    EmbeddingError: 503,
    VectorIndexError: 503,
}

HTTP_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
              409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type", 429: "too_many_requests",
              503: "unavailable"}


def _body(status: int, code: str, message: str, field: str | None = None) -> Response[ErrorBody]:
    return Response(ErrorBody(code=code, message=message, field=field, status=status), status_code=status)


def domain_error(_: Request, exc: DomainError) -> Response[ErrorBody]:
    status = next((s for t, s in DOMAIN_STATUS.items() if isinstance(exc, t)), 400)
    return _body(status, exc.code, exc.message, exc.field)


def validation_error(_: Request, exc: ValidationException) -> Response[ErrorBody]:
    field, message = None, exc.detail
    extra = exc.extra if isinstance(exc.extra, list) else []
    if extra and isinstance(extra[0], dict):
        first = extra[0]
        field = first.get("key") or None
        message = first.get("message") or message
        if field and field not in str(message):
            message = f"{field}: {message}"
    if "malformed" in str(exc.detail).lower() or "json" in str(exc.detail).lower() and not extra:
        message = f"malformed JSON body: {exc.detail}"
    return _body(400, "validation_error", str(message), field)


def http_error(_: Request, exc: HTTPException) -> Response[ErrorBody]:
    status = exc.status_code
    if status >= 500:
        log.error("server error %s: %s", status, exc.detail)
        return _body(status, "internal_error", "the server failed to handle the request")
    return _body(status, HTTP_CODES.get(status, "client_error"), str(exc.detail))


def unexpected_error(request: Request, exc: Exception) -> Response[ErrorBody]:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _body(HTTP_500_INTERNAL_SERVER_ERROR, "internal_error", "the server failed to handle the request")


EXCEPTION_HANDLERS = {
    DomainError: domain_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    Exception: unexpected_error,
}
