from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, delete, get, patch, post
from litestar.params import Parameter

from app.routes.deps import LIST_DESCRIPTION, Cursor, Filter, Limit, Offset, PathId, errors
from app.routes.examples import CreateSessionBody, UpdateSessionBody
from app.schemas import (
    EpisodePage, SessionCursorPage, SessionOut, SessionPage, SummaryOut, wire,
)
from domain.services import EpisodeService, SessionService, SummaryService


class SessionController(Controller):
    path = "/sessions"
    tags = ["sessions"]

    @post("/", summary="Create a session", responses=errors(400, 409, 413),
          description=(
              "Sessions group the episodes of one conversation; `externalId` is the caller's own id and "
              'is unique.'
          ), raises=[], status_code=201)
    async def create(self, data: CreateSessionBody, session_service: SessionService) -> SessionOut:
        return wire(await session_service.create(data.external_id, data.metadata), SessionOut)

    @get("/", summary="List sessions, oldest first (offset pages) or by cursor", responses=errors(400),
         description=(
             "Without `order`, `cursor` or `filter` the answer is the offset page `{items, total, limit, offset}`, "
             "exactly as before. With any of them it is the cursor page `{items, limit, nextCursor}`. "
             + LIST_DESCRIPTION + " `offset` cannot be combined with the cursor form."))
    async def list_all(
        self, session_service: SessionService, limit: Limit = 20, offset: Offset | None = None,
        order: Annotated[Literal["asc", "desc"] | None, Parameter(
            description="asc: oldest first; desc: newest first (selects the cursor form)")] = None,
        cursor: Cursor = None, filter: Filter = None,
    ) -> SessionPage | SessionCursorPage:
        if order is None and cursor is None and filter is None:
            return wire(await session_service.list(limit, offset or 0), SessionPage)
        page = await session_service.listed(limit=limit, order=order or "asc", cursor=cursor, filter=filter,
                                            offset=offset)
        return wire(page, SessionCursorPage)

    @get("/by-external/{external_id:str}", summary="Get a session by its external id", responses=errors(400, 404))
    async def by_external(self, external_id: str, session_service: SessionService) -> SessionOut:
        return wire(await session_service.by_external_id(external_id), SessionOut)

    @get("/{session_id:str}", summary="Get a session", responses=errors(400, 404))
    async def get_one(self, session_id: PathId, session_service: SessionService) -> SessionOut:
        return wire(await session_service.get(session_id), SessionOut)

    @patch("/{session_id:str}", summary="Replace a session's metadata", responses=errors(400, 404, 413))
    async def update(self, session_id: PathId, data: UpdateSessionBody, session_service: SessionService) -> SessionOut:
        return wire(await session_service.update(session_id, data.metadata), SessionOut)

    @delete("/{session_id:str}", summary="Delete a session, its episodes, summaries and their vectors",
          responses=errors(400, 404))
    async def remove(self, session_id: PathId, session_service: SessionService) -> None:
        await session_service.delete(session_id)

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
