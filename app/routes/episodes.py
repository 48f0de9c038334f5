from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, delete, get, patch, post
from litestar.params import Parameter, QueryParameter

from app.routes.deps import (
    LIST_DESCRIPTION, AgentFilter, Cursor, Filter, Limit, Order, PathId, SessionFilter, UserFilter, errors,
)
from app.routes.examples import CreateEpisodeBody, EpisodeBatchBody, UpdateEpisodeBody
from app.cursor_pages import EpisodeCursorPage
from app.idempotency import answered, idempotent, nothing
from app.schemas import (
    EpisodeHit, EpisodeOut, EpisodeSearchOut, episode_out, new_record, wire,
)
from app.schemas_changes import changes_of
from domain.limits import MAX_BATCH, MAX_ID, MAX_KEYWORD_QUERY, MAX_LIMIT
from domain.models import EpisodeChanges, NewEpisode, Owner
from domain.services import EpisodeService


class EpisodeController(Controller):
    path = "/episodes"
    tags = ["episodes"]
    opt = idempotent()

    @post("/", summary="Store an episode (embedding follows in the background)", responses=errors(400, 404, 413, 422),
          description=(
              'Answers 201 as soon as the episode and its embedding job are committed; the vector is '
              'written by the background worker (see `embeddingBacklog` in `/health`).'
          ), status_code=201)
    async def create(self, data: CreateEpisodeBody, episode_service: EpisodeService) -> EpisodeOut:
        return await answered(lambda: episode_service.add(new_record(data, NewEpisode)), episode_out, 201)

    @post("/batch", summary="Store many episodes in one transaction", responses=errors(400, 404, 413, 422),
          description=f'Up to {MAX_BATCH} episodes, all or none.', status_code=201)
    async def create_batch(self, data: EpisodeBatchBody, episode_service: EpisodeService) -> list[EpisodeOut]:
        return await answered(lambda: episode_service.add_batch([new_record(e, NewEpisode) for e in data.episodes]),
                              lambda found: wire(found, list[EpisodeOut]), 201)

    @get("/", summary="List episodes across sessions or in one (filter by metadata; oldest or newest first)",
         responses=errors(400), description=LIST_DESCRIPTION)
    async def list_all(
        self, episode_service: EpisodeService, limit: Limit = 20, order: Order = "asc", cursor: Cursor = None,
        filter: Filter = None, session_id: SessionFilter = None, user_id: UserFilter = None,
        agent_id: AgentFilter = None,
    ) -> EpisodeCursorPage:
        page = await episode_service.listed(limit=limit, order=order, cursor=cursor, filter=filter,
                                            session_id=session_id, owner=Owner(user_id, agent_id))
        return wire(page, EpisodeCursorPage)

    @get("/search", summary="Keyword (FTS5 BM25) search across episodes", responses=errors(400, 404),
          description="`match=all` (default) needs every word, `any` at least one; `fts` passes raw FTS5 "
                      "syntax (a syntax error is a 400).")
    async def search(
        self,
        episode_service: EpisodeService,
        q: Annotated[str, Parameter(min_length=1, max_length=MAX_KEYWORD_QUERY, description="the words to find")],
        limit: Annotated[int, Parameter(ge=1, le=MAX_LIMIT)] = 10,
        session_id: Annotated[int | None, QueryParameter(name="sessionId", ge=1, le=MAX_ID)] = None,
        match: Annotated[
            Literal["all", "any", "fts"],
            Parameter(description="all: every word; any: at least one; fts: raw FTS5 syntax"),
        ] = "all",
    ) -> EpisodeSearchOut:
        hits = await episode_service.search(q, limit, session_id, match)
        return EpisodeSearchOut(query=q, match=match, results=[EpisodeHit(episode=episode_out(h.item), score=h.score)
                                                               for h in hits])

    @get("/{episode_id:str}", summary="Get an episode", responses=errors(400, 404))
    async def get_one(self, episode_id: PathId, episode_service: EpisodeService) -> EpisodeOut:
        return episode_out(await episode_service.get(episode_id))

    @patch("/{episode_id:str}", summary="Change an episode's text or metadata (re-indexed and re-embedded)",
          responses=errors(400, 404, 413, 422),
          description='JSON Merge Patch: fields left out stay as they are; `tokenCount: null` clears the '
                      'token count; null on any other field is a 400 naming it.')
    async def update(self, episode_id: PathId, data: UpdateEpisodeBody, episode_service: EpisodeService) -> EpisodeOut:
        return await answered(lambda: episode_service.update(episode_id, changes_of(data, EpisodeChanges)),
                              episode_out, 200)

    @delete("/{episode_id:str}", summary="Delete an episode and its vector", responses=errors(400, 404, 422))
    async def remove(self, episode_id: PathId, episode_service: EpisodeService) -> None:
        return await answered(lambda: episode_service.delete(episode_id), nothing, 204)
