"""A search's first k hits are the same whatever limit up to ``STABLE_LIMIT`` was asked for:
asking for 5 gives the first 5 of asking for 20 (over the in-memory adapters, every built-in ranker
and stores larger than a leg's depth, so the legs cut candidates off)."""

from __future__ import annotations

import random

import pytest

from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from app.plugins import RankerRegistry, get_plugin_manager
from domain import writes
from domain.indexing import IndexingService
from domain.models import NewEpisode
from domain.ranking import RankerConfig
from domain.retrieval import STABLE_LIMIT, SearchQuery, SearchService

WORDS = ("harbour boat kitten budget launch lisbon cello ramen deploy friday meeting tuesday garden river "
         "mountain coffee invoice spark rocket piano when may yesterday").split()


RANKERS = RankerRegistry(get_plugin_manager(load_entrypoints=False), RankerConfig())  # the built-in ones


@pytest.fixture
async def service() -> SearchService:
    rng = random.Random(11)
    store, index, embedder = MemoryStore(), InMemoryVectorIndex(), FakeEmbedder(16)
    await index.ensure_collection("episodes", 16)
    for s in range(4):
        session = await store.uow.run(lambda tx: writes.create_session(tx, f"s{s}", {}))
        await store.uow.run(lambda tx: writes.add_episodes(tx, [
            NewEpisode(session.id, " ".join(rng.choices(WORDS, k=8)), " ".join(rng.choices(WORDS, k=4)))
            for _ in range(60)
        ]))
    indexing = IndexingService(store, index, embedder)
    while (await indexing.run_once(batch=256)).done:
        pass
    return SearchService(store, index, embedder, RANKERS, "conversation")


@pytest.mark.parametrize("ranker", RANKERS.names())
@pytest.mark.parametrize("query", ["harbour boat", "when did the rocket launch", "coffee", "piano friday may"])
@pytest.mark.parametrize("min_score", [None, 0.0])
async def test_the_first_k_hits_do_not_depend_on_the_limit(
        service: SearchService, ranker: str, query: str, min_score: float | None) -> None:
    def ids(result):
        return [hit.item.id for hit in result.hits]

    full = ids(await service.search(SearchQuery(query, limit=STABLE_LIMIT, ranker=ranker, min_score=min_score)))
    assert full, "the query finds something"
    for k in (1, 3, 5, 10, 15):
        assert ids(await service.search(SearchQuery(query, limit=k, ranker=ranker, min_score=min_score))) == full[:k]


class CountingReranker:
    """Scores a text by its length (any order will do) and keeps how many texts each call had."""

    name = "counting"

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def rerank(self, query: str, texts) -> list[float]:
        self.sizes.append(len(texts))
        return [float(len(text)) for text in texts]


async def test_a_reranker_reorders_rerank_depth_hits_for_any_limit_up_to_the_stable_one(
        service: SearchService) -> None:
    reranker = service.reranker = CountingReranker()
    full = await service.search(SearchQuery("harbour boat", limit=STABLE_LIMIT, min_score=0.0))
    for k in (5, 10):
        found = await service.search(SearchQuery("harbour boat", limit=k, min_score=0.0))
        assert [hit.item.id for hit in found.hits] == [hit.item.id for hit in full.hits][:k]
    service.rerank_depth = 30
    await service.search(SearchQuery("harbour boat", limit=10, min_score=0.0))
    await service.search(SearchQuery("harbour boat", limit=25, min_score=0.0))
    await service.search(SearchQuery("harbour boat", limit=40, min_score=0.0))
    # RERANK_DEPTH (20 by default), never fewer than the limit: as many texts whatever limit up to 20.
    assert reranker.sizes == [STABLE_LIMIT, STABLE_LIMIT, STABLE_LIMIT, 30, 30, 40]
