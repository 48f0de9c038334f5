"""Litestar dependencies: small provider functions that ask the container for a service."""

from __future__ import annotations

from typing import Annotated, Literal

from litestar.di import Provide
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import Example
from litestar.params import Parameter, QueryParameter

from app.requests import wire_timestamp
from app.schemas import ErrorBody
from app.auth import request_services
from domain.errors import Invalid, Unauthorized
from domain.keys import KeyService
from domain.scoped import Services
from domain.feed import EventService, HistoryService

from domain.context import ContextService
from domain.listing import MAX_CURSOR, MAX_FILTER_TEXT
from domain.limits import MAX_ID, MAX_LIMIT, MAX_NAME, MAX_OFFSET
from domain.retrieval import SearchService
from domain.services import EntityService, EpisodeService, SessionService, SummaryService, UserService

PathId = Annotated[int, Parameter(ge=1, le=MAX_ID, description="a positive integer id")]
Limit = Annotated[int, Parameter(ge=1, le=MAX_LIMIT, description=f"page size, 1-{MAX_LIMIT}")]
Offset = Annotated[int, Parameter(ge=0, le=MAX_OFFSET, description="rows to skip")]

# The keyset lists' parameters (domain.listing): the service checks them again and names the field.
Order = Annotated[Literal["asc", "desc"], Parameter(description="asc: oldest first (default); desc: newest first")]
Cursor = Annotated[str | None, Parameter(max_length=MAX_CURSOR, description=(
    "nextCursor of the previous page, unchanged (with the same order); leave out for the first page"))]
Filter = Annotated[str | None, Parameter(max_length=MAX_FILTER_TEXT, description=(
    'a metadata filter as JSON, e.g. {"metadata": {"topic": "pets", "score": {"gte": 3}}} '
    "(URL-encoded; the same filter as POST /search)"))]
SessionFilter = Annotated[int | None, QueryParameter(name="sessionId", ge=1, le=MAX_ID, description="one session's records")]
EntityFilter = Annotated[int | None, QueryParameter(name="entityId", ge=1, le=MAX_ID, description="edges from or to it")]
UserFilter = Annotated[str | None, QueryParameter(name="userId", min_length=1, max_length=MAX_NAME,
                                                  description="records owned by this user")]
AgentFilter = Annotated[str | None, QueryParameter(name="agentId", min_length=1, max_length=MAX_NAME,
                                                   description="records of this agent's sessions")]
LIST_DESCRIPTION = (
    "Keyset pagination over (createdAt, id): pass the answer's `nextCursor` as `cursor` for the next page "
    "(null on the last page). Rows written while you page never make a page repeat or skip a row that "
    "existed before. `filter` is a JSON metadata filter; `order=desc` lists newest first."
)


AS_OF = "an RFC 3339 date-time: only the edges valid at that moment (validFrom <= asOf < validTo)"


def as_of_param(value: str | None) -> str | None:
    """``asOf`` of a query string by the body rule (RFC 3339, then the supported range), canonical."""
    if value is None:
        return None
    try:
        return wire_timestamp(value, "asOf")
    except ValueError as exc:
        raise Invalid(str(exc), field="asOf") from None


# The `_service` suffix is load-bearing: Litestar treats a validation error whose key equals a
# dependency name as a server fault (500), so a body field such as `episodes` in
# POST /episodes/batch must never share a name with a dependency.
def dependencies(container) -> dict[str, Provide]:
    """The services the handlers ask for, from ``container``. The providers take no parameters:
    Litestar then skips parsing a signature model for them on every request (asking for
    ``state`` cost a measurable share of a fast request)."""

    def allowed() -> Services:
        # Set by app.auth for each request it let through; a route outside that door has no services.
        services = request_services.get()
        if services is None:
            raise Unauthorized("this request passed no authentication")
        return services

    def session_service() -> SessionService:
        return allowed().sessions

    def episode_service() -> EpisodeService:
        return allowed().episodes

    def entity_service() -> EntityService:
        return allowed().entities

    def summary_service() -> SummaryService:
        return allowed().summaries

    def search_service() -> SearchService:
        return allowed().search

    def context_service() -> ContextService:
        return allowed().context

    def user_service() -> UserService:
        return allowed().users

    def history_service() -> HistoryService:
        return allowed().history

    def event_service() -> EventService:
        return allowed().events

    def key_service() -> KeyService:
        return container.keys()

    return {fn.__name__: Provide(fn, sync_to_thread=False) for fn in (
        session_service, episode_service, entity_service, summary_service, search_service, context_service,
        user_service, history_service, event_service, key_service)}


ERROR_DESCRIPTIONS = {
    400: "Invalid request: malformed JSON, a wrong type, a missing field or a value out of range",
    401: "A key is configured and the request has no valid 'Authorization: Bearer <key>' header",
    403: "The key does not allow this: a scope it lacks, or another owner's userId",
    404: "No such record",
    409: "Conflicts with an existing record",
    413: "The request body is larger than MAX_BODY_BYTES",
    422: ("The Idempotency-Key was already used for a different request (another body, path or caller). "
          "Every write takes an optional Idempotency-Key header: a retry with the same key and request is "
          "answered the first answer (marked Idempotent-Replayed: true) without writing again"),
    503: "A backing component (embedder, vector index) is unavailable",
}
ERROR_EXAMPLES = {
    400: {"code": "validation_error", "message": f"limit: Expected `int` <= {MAX_LIMIT}", "field": "limit", "status": 400},
    401: {"code": "unauthorized", "message": "a valid 'Authorization: Bearer <MEMORY_API_KEY>' header is required",
          "field": None, "status": 401},
    403: {"code": "forbidden", "message": "userId must be 'u1', the user this key is bound to", "field": "userId",
          "status": 403},
    404: {"code": "not_found", "message": "session 42 does not exist", "field": None, "status": 404},
    409: {"code": "conflict", "message": "a session with externalId 'conv-1' exists", "field": "externalId",
          "status": 409},
    413: {"code": "payload_too_large", "message": "Request Entity Too Large", "field": None, "status": 413},
    422: {"code": "idempotency_key_reused", "message": "Idempotency-Key 'k1' was already used for a different request",
          "field": "Idempotency-Key", "status": 422},
    503: {"code": "unavailable", "message": "the embedder is unreachable", "field": None, "status": 503},
}


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """The documented error responses of a route (every one can answer 401 when a key is set):
    all share the ``ErrorBody`` shape."""
    return {
        status: ResponseSpec(ErrorBody, description=ERROR_DESCRIPTIONS[status], generate_examples=False,
                             examples=[Example(summary=ERROR_EXAMPLES[status]["code"], value=ERROR_EXAMPLES[status])])
        for status in sorted({*statuses, 401})
    }
