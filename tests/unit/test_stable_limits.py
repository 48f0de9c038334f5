"""A search's first k hits are the same whatever limit up to ``STABLE_LIMIT`` was asked for:
asking for 5 gives the first 5 of asking for 20 (over the in-memory adapters, the built-in rankers
and stores larger than a leg's depth, so the legs cut candidates off)."""

from __future__ import annotations

import random

import pytest

from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.rankers.conversation import ConversationRanker
from adapters.rankers.builtin import MmrRanker, RecencyRanker, RrfRanker, WeightedRanker
from domain import writes
from domain.indexing import IndexingService
from domain.models import NewEpisode
from domain.ranking import RankerConfig
from domain.retrieval import STABLE_LIMIT, SearchQuery, SearchService

WORDS = ("harbour boat kitten budget launch lisbon cello ramen deploy friday meeting tuesday garden river "
         "mountain coffee invoice spark rocket piano when may yesterday").split()


class Rankers:
    def __init__(self) -> None:
        config = RankerConfig()
        self._rankers = {r.name: r for r in (ConversationRanker(config), RrfRanker(config), WeightedRanker(config),
                                               RecencyRanker(config), MmrRanker(config))}

    def get(self, name: str):
        return self._rankers[name]


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
    return SearchService(store, index, embedder, Rankers(), "conversation")


@pytest.mark.parametrize("ranker", ["conversation", "rrf", "weighted", "recency", "mmr"])
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
