"""Conversation context through the ranker port: a ranker with a context window gets each episode
candidate's session neighbours as candidates, and may return one no leg found."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from domain import writes
from domain.models import NewEpisode, format_timestamp
from domain.ranking import Context, RankedHit, RankingRequest
from domain.retrieval import SearchQuery, SearchService

START = datetime(2025, 5, 1, tzinfo=UTC)


class AllCandidates:
    """Answers every candidate, by key, and keeps the request it was given."""

    description = "every candidate"
    needs_vectors = False

    def __init__(self, name: str, window: int) -> None:
        self.name = name
        self.context_window = window
        self.seen: RankingRequest | None = None

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        self.seen = request
        return [RankedHit(key, 1.0) for key in sorted(request.candidates)][: request.limit]


class Lookup:
    def __init__(self, *rankers: AllCandidates) -> None:
        self._rankers = {r.name: r for r in rankers}

    def get(self, name: str) -> AllCandidates:
        return self._rankers[name]


async def _service(*rankers: AllCandidates) -> tuple[SearchService, list[int], int]:
    store = MemoryStore()
    session = await store.uow.run(lambda tx: writes.create_session(tx, "s", {}))
    other = await store.uow.run(lambda tx: writes.create_session(tx, "other", {}))
    texts = ["we adopted a puppy", "what did you call it", "Biscuit, after the cookie", "weather talk", "more weather"]
    added = await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(session.id, text, "ok", created_at=format_timestamp(START + timedelta(minutes=i)))
        for i, text in enumerate(texts)
    ]))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(other.id, "puppy elsewhere", "ok")]))
    index = InMemoryVectorIndex()
    await index.ensure_collection("episodes", 8)  # empty: only the keyword leg finds anything
    service = SearchService(store, index, FakeEmbedder(8), Lookup(*rankers), rankers[0].name)
    return service, [e.id for e in added], session.id


async def test_a_ranker_with_a_context_window_gets_and_may_return_neighbours_no_leg_found() -> None:
    ranker = AllCandidates("ctx", 1)
    service, ids, session = await _service(ranker)
    # minScore 0: the turn after has no evidence of its own, and the default floor would drop it.
    result = await service.search(SearchQuery("puppy", session_id=session, min_score=0.0))
    assert [hit.item.id for hit in result.hits] == [ids[0], ids[1]]  # the hit and the turn after it
    assert result.hits[1].keyword is None and result.hits[1].vector is None
    assert ranker.seen is not None
    assert ranker.seen.neighbours[("episodes", ids[0])] == Context(before=(), after=(("episodes", ids[1]),))
    assert ("episodes", ids[1]) not in ranker.seen.neighbours  # neighbours of hits only, not of neighbours


async def test_a_wider_window_brings_more_neighbours_nearest_first() -> None:
    ranker = AllCandidates("wide", 2)
    service, ids, session = await _service(ranker)
    await service.search(SearchQuery("cookie", session_id=session))
    assert ranker.seen is not None
    assert ranker.seen.neighbours[("episodes", ids[2])] == Context(
        before=(("episodes", ids[1]), ("episodes", ids[0])), after=(("episodes", ids[3]), ("episodes", ids[4])),
    )


async def test_without_a_context_window_only_leg_candidates_are_ranked() -> None:
    ranker = AllCandidates("plain", 0)
    service, ids, session = await _service(ranker)
    result = await service.search(SearchQuery("puppy", session_id=session))
    assert [hit.item.id for hit in result.hits] == [ids[0]]
    assert ranker.seen is not None and ranker.seen.neighbours == {}


async def test_a_neighbour_outside_the_time_range_stays_out() -> None:
    ranker = AllCandidates("ranged", 1)
    service, ids, session = await _service(ranker)
    # The turn after "what did you call it" matches; the one before it is older than `since`.
    result = await service.search(SearchQuery(
        "call", session_id=session, since=START + timedelta(minutes=1), min_score=0.0))
    assert [hit.item.id for hit in result.hits] == [ids[1], ids[2]]
    assert ranker.seen is not None
    assert ranker.seen.neighbours[("episodes", ids[1])] == Context(before=(), after=(("episodes", ids[2]),))


async def test_an_embedder_timing_out_on_its_own_degrades_the_search_to_keywords() -> None:
    # The port says an embedder wraps its failures in EmbeddingError; one that lets a bare
    # TimeoutError out (a socket's) still costs the search only its vector leg.
    ranker = AllCandidates("plain", 0)
    service, ids, session = await _service(ranker)
    service._embedder.go_down(TimeoutError("the socket timed out"))
    result = await service.search(SearchQuery("puppy", session_id=session, min_score=0.0))
    assert result.degraded and [hit.item.id for hit in result.hits] == [ids[0]]
    assert any("the socket timed out" in warning for warning in result.warnings), result.warnings
