from __future__ import annotations

from litestar import Controller, delete, get, patch, post

from app.routes.deps import (
    LIST_DESCRIPTION, AgentFilter, Cursor, Filter, Limit, Order, PathId, SessionFilter, UserFilter, errors,
)
from app.routes.examples import CreateSummaryBody, UpdateSummaryBody
from app.cursor_pages import SummaryCursorPage
from app.idempotency import answered, idempotent, nothing
from app.schemas import SummaryOut, new_record, wire
from app.schemas_changes import changes_of
from domain.models import NewSummary, Owner, SummaryChanges
from domain.services import SummaryService


class SummaryController(Controller):
    path = "/summaries"
    tags = ["summaries"]
    opt = idempotent()

    @post("/", summary="Store a summary of a session (embedded in the background)",
          responses=errors(400, 404, 413, 422), status_code=201)
    async def create(self, data: CreateSummaryBody, summary_service: SummaryService) -> SummaryOut:
        new = new_record(data, NewSummary)
        return await answered(lambda: summary_service.add(new), lambda summary: wire(summary, SummaryOut), 201)

    @get("/", summary="List summaries across sessions or in one (filter by metadata)", responses=errors(400),
         description=LIST_DESCRIPTION)
    async def list_all(
        self, summary_service: SummaryService, limit: Limit = 20, order: Order = "asc", cursor: Cursor = None,
        filter: Filter = None, session_id: SessionFilter = None, user_id: UserFilter = None,
        agent_id: AgentFilter = None,
    ) -> SummaryCursorPage:
        page = await summary_service.listed(limit=limit, order=order, cursor=cursor, filter=filter,
                                            session_id=session_id, owner=Owner(user_id, agent_id))
        return wire(page, SummaryCursorPage)

    @get("/{summary_id:str}", summary="Get a summary", responses=errors(400, 404))
    async def get_one(self, summary_id: PathId, summary_service: SummaryService) -> SummaryOut:
        return wire(await summary_service.get(summary_id), SummaryOut)

    @patch("/{summary_id:str}", summary="Change a summary's content, counts or metadata (re-indexed and re-embedded)",
           responses=errors(400, 404, 413, 422), description=(
               "JSON Merge Patch: fields left out stay as they are; null clears `firstEpisodeId`, `lastEpisodeId` or "
               "`tokenCount`; null on content, episodeCount or metadata is a 400 naming it."))
    async def update(self, summary_id: PathId, data: UpdateSummaryBody, summary_service: SummaryService) -> SummaryOut:
        return await answered(lambda: summary_service.update(summary_id, changes_of(data, SummaryChanges)),
                              lambda summary: wire(summary, SummaryOut), 200)

    @delete("/{summary_id:str}", summary="Delete a summary and its vector", responses=errors(400, 404, 422))
    async def remove(self, summary_id: PathId, summary_service: SummaryService) -> None:
        return await answered(lambda: summary_service.delete(summary_id), nothing, 204)
