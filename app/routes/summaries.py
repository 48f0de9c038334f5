from __future__ import annotations

from litestar import Controller, delete, get, post

from app.routes.deps import PathId, errors
from app.routes.examples import CreateSummaryBody
from app.schemas import SummaryOut, wire
from domain.models import NewSummary, format_timestamp
from domain.services import SummaryService


class SummaryController(Controller):
    path = "/summaries"
    tags = ["summaries"]

    @post("/", summary="Store a summary of a session (embedded in the background)",
          responses=errors(400, 404, 413), status_code=201)
    async def create(self, data: CreateSummaryBody, summary_service: SummaryService) -> SummaryOut:
        new = NewSummary(data.session_id, data.content, data.first_episode_id, data.last_episode_id,
                         data.episode_count, data.token_count, data.metadata,
                         format_timestamp(data.expires_at) if data.expires_at else None)
        return wire(await summary_service.add(new), SummaryOut)

    @get("/{summary_id:str}", summary="Get a summary", responses=errors(400, 404))
    async def get_one(self, summary_id: PathId, summary_service: SummaryService) -> SummaryOut:
        return wire(await summary_service.get(summary_id), SummaryOut)

    @delete("/{summary_id:str}", summary="Delete a summary and its vector", responses=errors(400, 404))
    async def remove(self, summary_id: PathId, summary_service: SummaryService) -> None:
        await summary_service.delete(summary_id)
