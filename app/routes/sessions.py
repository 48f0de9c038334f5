from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, delete, get, patch, post
from litestar.params import Parameter, QueryParameter

from app.routes.deps import LIST_DESCRIPTION, Cursor, Filter, Limit, Offset, PathId, errors
from app.routes.examples import CreateSessionBody, UpdateSessionBody
from app.cursor_pages import SessionCursorPage
from app.idempotency import answered, idempotent, nothing
from app.schemas import (
    EpisodePage, SessionOut, SessionPage, SummaryOut, wire,
)
from domain.limits import MAX_NAME
from domain.models import Owner
from domain.services import EpisodeService, SessionService, SummaryService


class SessionController(Controller):
    path = "/sessions"
    tags = ["sessions"]
    opt = idempotent()

    @post("/", summary="Create a session", responses=errors(400, 409, 413, 422),
          description=(
              "Sessions group the episodes of one conversation; `externalId` is the caller's own id and "
              'is unique.'
          ), raises=[], status_code=201)
    async def create(self, data: CreateSessionBody, session_service: SessionService) -> SessionOut:
        owner = Owner(data.user_id, data.agent_id)
        return await answered(lambda: session_service.create(data.external_id, data.metadata, owner),
                              lambda session: wire(session, SessionOut), 201)

    @get("/", summary="List sessions, oldest first (offset pages) or by cursor", responses=errors(400),
         description=(
             "`userId` and `agentId` keep the sessions of that user / agent (both: of both). Without `order`, "
             "`cursor` or `filter` the answer is the offset page `{items, total, limit, offset}`, exactly as "
             "before. With any of them it is the cursor page `{items, limit, nextCursor}`. "
             + LIST_DESCRIPTION + " `offset` cannot be combined with the cursor form."))
    async def list_all(
        self, session_service: SessionService, limit: Limit = 20, offset: Offset | None = None,
        user_id: Annotated[str | None, QueryParameter(name="userId", min_length=1, max_length=MAX_NAME)] = None,
        agent_id: Annotated[str | None, QueryParameter(name="agentId", min_length=1, max_length=MAX_NAME)] = None,
        order: Annotated[Literal["asc", "desc"] | None, Parameter(
            description="asc: oldest first; desc: newest first (selects the cursor form)")] = None,
        cursor: Cursor = None, filter: Filter = None,
    ) -> SessionPage | SessionCursorPage:
        owner = Owner(user_id, agent_id)
        if order is None and cursor is None and filter is None:
            return wire(await session_service.list(limit, offset or 0, owner), SessionPage)
        page = await session_service.listed(limit=limit, order=order or "asc", cursor=cursor, filter=filter,
                                            offset=offset, owner=owner)
        return wire(page, SessionCursorPage)

    # ``path``, not ``str``: an external id may hold "/" (``user%2F42`` arrives decoded as
    # ``user/42``), and a ``str`` parameter stops at the first slash.
    @get("/by-external/{external_id:path}", summary="Get a session by its external id", responses=errors(400, 404),
         description="An external id with `/` inside works too (send it percent-encoded, e.g. `user%2F42`); "
                     "one that starts or ends with `/` is reached with `GET /sessions/by-external?externalId=`.")
    async def by_external(self, external_id: str, session_service: SessionService) -> SessionOut:
        return wire(await session_service.by_external_id(external_id.removeprefix("/")), SessionOut)

    @get("/by-external", summary="Get a session by its external id, given as a query parameter",
         responses=errors(400, 404), description="Reaches any external id, whatever characters it holds.")
    async def by_external_query(
        self, session_service: SessionService,
        external_id: Annotated[str, QueryParameter(name="externalId", min_length=1, max_length=MAX_NAME)],
    ) -> SessionOut:
        return wire(await session_service.by_external_id(external_id), SessionOut)

    @get("/{session_id:str}", summary="Get a session", responses=errors(400, 404))
    async def get_one(self, session_id: PathId, session_service: SessionService) -> SessionOut:
        return wire(await session_service.get(session_id), SessionOut)

    @patch("/{session_id:str}", summary="Replace a session's metadata", responses=errors(400, 404, 413, 422))
    async def update(self, session_id: PathId, data: UpdateSessionBody, session_service: SessionService) -> SessionOut:
        return await answered(lambda: session_service.update(session_id, data.metadata),
                              lambda session: wire(session, SessionOut), 200)

    @delete("/{session_id:str}", summary="Delete a session, its episodes, summaries and their vectors",
          responses=errors(400, 404, 422))
    async def remove(self, session_id: PathId, session_service: SessionService) -> None:
        return await answered(lambda: session_service.delete(session_id), nothing, 204)

    @get("/{session_id:str}/episodes", summary="A session's episodes, oldest first, with the total",
          responses=errors(400, 404),
          description='Paginated with `limit` and `offset`; `total` counts every episode of the session.')
    async def episodes_of(
        self, session_id: PathId, episode_service: EpisodeService, limit: Limit = 20, offset: Offset = 0
    ) -> EpisodePage:
        return wire(await episode_service.of_session(session_id, limit, offset), EpisodePage)

    @get("/{session_id:str}/summaries", summary="A session's summaries, oldest first", responses=errors(400, 404))
    async def summaries_of(self, session_id: PathId, summary_service: SummaryService) -> list[SummaryOut]:
        return wire(await summary_service.of_session(session_id), list[SummaryOut])
