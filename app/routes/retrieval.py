from __future__ import annotations

from litestar import Controller, get, post
from litestar.datastructures import State

from app.routes.deps import errors
from app.routes.examples import ContextRequestBody, SearchRequestBody
from app.schemas import ContextOut, RankerOut, SearchOut, context_out, search_out
import msgspec

from domain.context import ContextService
from domain.filters import parse_filter
from domain.models import Owner
from domain.retrieval import SearchQuery, SearchService


class RetrievalController(Controller):
    tags = ["retrieval"]

    @post("/search", summary="Hybrid retrieval: vector + keyword legs fused by a ranker",
          responses=errors(400, 404, 413),
          description=(
              'Embeds the query, searches the vector index and FTS5 concurrently, and fuses both legs '
              "with the chosen ranker (`GET /rankers`). Each hit carries its final score and each leg's "
              'rank and score. With the embedder or vector index down the answer comes from the keyword '
              'leg with `degraded: true`. `userId` / `agentId` search every session of that user / agent '
              '(with `sessionId` too, the session must be theirs); `filter.metadata` keeps records whose '
              "metadata matches (both legs). Each hit has a `relevance` on a fixed 0-1 scale, the same for "
              "every ranker and query (`score` is the ranker's own, for ordering); hits below `minScore` "
              "(default: the ranker's floor, echoed as `minScore` in the answer; 0 keeps every hit) are "
              "left out. Records of the searched scope still waiting for their embedding are embedded "
              "first, within a bound (`readYourWrites: false` skips that); `pending` counts those still "
              "waiting, which only the keyword leg can find."
          ), status_code=200)
    async def search(self, data: SearchRequestBody, search_service: SearchService) -> SearchOut:
        query = SearchQuery(data.query, data.limit, data.session_id, tuple(data.sources), data.ranker,
                            data.since, data.until, Owner(data.user_id, data.agent_id),
                            parse_filter(msgspec.to_builtins(data.filter)), data.min_score,
                            data.read_your_writes)
        return search_out(await search_service.search(query))

    @post("/context", summary="The context package for a prompt, cut to a token budget",
          responses=errors(400, 404, 413),
          description=(
              'The most relevant episodes and summaries (at or above the search relevance floor), the turns '
              'next to those episodes (`neighbourEpisodes`), the recent episodes of the session and the '
              'entities they mention with their relationships, deduplicated and cut to `tokenBudget`: '
              'relevant items are admitted first (best first), then recent ones, then neighbours, then '
              'entities; what is kept is listed in time order, and what did not fit is in `omitted` with its '
              '`role` and `reason`. `pending` counts records still waiting for their embedding. '
              'With `userId` / `agentId` the relevant memory spans all their sessions (`sessionId` is then '
              'optional and gives the recent episodes). '
              'Relationships are those valid at `asOf` (default now).'
          ), status_code=200)
    async def context(self, data: ContextRequestBody, context_service: ContextService) -> ContextOut:
        return context_out(await context_service.build(data.query, data.session_id, data.token_budget,
                                               data.recent_episodes, data.relevant_limit, data.ranker,
                                               Owner(data.user_id, data.agent_id), as_of=data.as_of))

    @get("/rankers", summary="Installed rankers and the plugin that provides each", responses=errors())
    async def rankers(self, state: State) -> list[RankerOut]:
        default = state.container.settings().default_ranker
        return [RankerOut(name=r.name, description=r.description, plugin=r.plugin, default=r.name == default)
                for r in state.container.rankers().describe()]
