"""What changed: a record's history and the change feed (GET /events, a long-poll)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from litestar import Controller, Request, get
from litestar.params import Parameter

from app.routes.deps import PathId, errors
from app.schemas import wire
from app.schemas_changes import EventOut, EventsOut, HistoryOut, history_out
from app.auth import PRINCIPAL
from domain import changes
from domain.feed import EventService, HistoryService, check_actor
from domain.limits import MAX_EVENT_WAIT, MAX_EVENTS, MAX_ID, MAX_LIMIT

After = Annotated[int, Parameter(ge=0, le=MAX_ID, description="a cursor: only what came after this number")]
HistoryLimit = Annotated[int, Parameter(ge=1, le=MAX_LIMIT, description=f"versions per page, 1-{MAX_LIMIT}")]
_HISTORY = ("Versions oldest first: each update or delete, when, by whom (`X-Actor`), the record before and "
            "after (`after` null when deleted) and the fields that changed. Still answers after the record "
            "is deleted; empty for a record that never changed (or an unknown id). Page with `after=nextAfter`.")


async def set_actor(request: Request) -> None:
    """A before-request hook: the ``X-Actor`` header names who makes this request's changes.
    Read from the raw headers: ``request.headers`` would build a header map on every request."""
    raw = next((value for key, value in request.scope["headers"] if key == b"x-actor"), None)
    said = check_actor(None if raw is None else raw.decode("latin-1"))
    # A request made with a stored key is recorded as that key's: its holder cannot write history in
    # another's name; the X-Actor it names is kept after the key's id. The bootstrap admin key is the
    # service's own operator (an orchestrator acting for its users): its X-Actor stands as given.
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    if principal is not None and principal.authenticated:
        if principal.key_id is not None:
            said = principal.actor if said is None else f"{principal.actor} ({said})"
        elif said is None:
            said = principal.actor
    changes.actor.set(said)


class HistoryController(Controller):
    path = "/"
    tags = ["history"]

    @get("/episodes/{episode_id:str}/history", summary="An episode's versions", responses=errors(400, 404),
         description=_HISTORY)
    async def episode(self, episode_id: PathId, history_service: HistoryService, after: After = 0,
                      limit: HistoryLimit = 100) -> HistoryOut:
        return history_out(await history_service.of_record("episodes", episode_id, after, limit))

    @get("/entities/{entity_id:str}/history", summary="An entity's versions", responses=errors(400, 404),
         description=_HISTORY)
    async def entity(self, entity_id: PathId, history_service: HistoryService, after: After = 0,
                     limit: HistoryLimit = 100) -> HistoryOut:
        return history_out(await history_service.of_record("entities", entity_id, after, limit))

    @get("/relationships/{relationship_id:str}/history", summary="A relationship's versions", responses=errors(400, 404),
         description=_HISTORY)
    async def relationship(self, relationship_id: PathId, history_service: HistoryService, after: After = 0,
                           limit: HistoryLimit = 100) -> HistoryOut:
        return history_out(await history_service.of_record("relationships", relationship_id, after, limit))

    @get("/summaries/{summary_id:str}/history", summary="A summary's versions", responses=errors(400, 404),
         description=_HISTORY)
    async def summary(self, summary_id: PathId, history_service: HistoryService, after: After = 0,
                      limit: HistoryLimit = 100) -> HistoryOut:
        return history_out(await history_service.of_record("summaries", summary_id, after, limit))


class EventController(Controller):
    path = "/events"
    tags = ["events"]

    @get("/", summary="The change feed: record changes and embeddings after a sequence number (long-poll)",
         responses=errors(400, 503),
         description=(
             "Events (`created`, `updated`, `deleted` of sessions, episodes, entities, relationships, summaries; "
             "`embedded` when the worker has embedded a record) with `seq > after`, oldest first. With "
             f"`wait` (seconds, up to {MAX_EVENT_WAIT}) an empty answer waits until an event arrives or the time "
             "is up. Pass `nextAfter` as the next `after`. `truncated` means events after `after` were already "
             "dropped by EVENT_RETENTION. Events carry ids only: read the record for its content. An `after` "
             "beyond the newest event is a 400 naming `after`. When as many polls wait as the service allows, "
             "a poll with `wait` is a 503 with `Retry-After` (seconds): wait that long, then poll again."))
    async def feed(
        self, request: Request, event_service: EventService, after: After = 0,
        limit: Annotated[int, Parameter(ge=1, le=MAX_EVENTS, description=f"events per answer, 1-{MAX_EVENTS}")] = 100,
        wait: Annotated[float, Parameter(ge=0, le=MAX_EVENT_WAIT, description="seconds to wait when none")] = 0,
    ) -> EventsOut:
        if not wait:
            return _events_out(await event_service.after(after, limit, wait))
        batch = asyncio.ensure_future(event_service.after(after, limit, wait))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({batch, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not batch.done():
                batch.cancel()  # the client went away: stop waiting for it
        if batch.cancelled():
            return EventsOut(events=[], next_after=after, truncated=False)
        return _events_out(batch.result())


def _events_out(found) -> EventsOut:
    return EventsOut(events=wire(found.events, list[EventOut]), next_after=found.next_after, truncated=found.truncated)


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (a GET has no body, so the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
