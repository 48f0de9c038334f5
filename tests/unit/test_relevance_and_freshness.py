"""The relevance scale (``domain.relevance``) and read-your-writes (``domain.freshness``) over the
in-memory adapters."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from domain import writes
from domain.freshness import ReadYourWrites
from domain.indexing import IndexingService
from domain.models import EpisodeChanges, NewEpisode
from domain.outbox import OutboxScope
from domain.relevance import DEFAULT_FLOOR, HASHED, MINILM, cosine_scale, meaning_evidence, relevance_of, word_evidence, query_terms


def test_the_cosine_scale_maps_unrelated_to_zero_and_close_to_one() -> None:
    assert meaning_evidence(MINILM.unrelated - 0.1) == 0.0 and meaning_evidence(MINILM.close + 0.1) == 1.0
    middle = (MINILM.unrelated + MINILM.close) / 2
    assert meaning_evidence(middle) == pytest.approx(0.5)


def test_a_model_is_read_on_its_own_scale_and_an_unknown_one_on_minilms() -> None:
    assert cosine_scale("sentence-transformers/all-MiniLM-L6-v2") == MINILM
    assert cosine_scale("hash") == HASHED and cosine_scale("nomic-embed-text") == MINILM


def test_one_word_of_a_longer_question_stays_below_the_floor() -> None:
    terms = query_terms("where did Ana fly the zeppelin")  # ana, fly, zeppelin (stop-words out)
    assert word_evidence(terms, "Ana is here") < DEFAULT_FLOOR <= word_evidence(terms, "Ana flew in a zeppelin")
    assert word_evidence(query_terms("allergies"), "I am allergic to peanuts") == 1.0  # by stem


def test_a_neighbour_inherits_half_its_hits_relevance_only_when_on_the_subject() -> None:
    texts = {"hit": "kitten", "after": "nurse", "before": "cats"}
    cosines = {"hit": MINILM.close, "after": 0.0, "before": MINILM.unrelated + 0.01}
    out = relevance_of("kitten", texts, cosines, {"hit": ("before", "after")})
    assert out["hit"] == 1.0 and out["after"] == 0.0 and out["before"] == 0.5


async def _pending_episodes(count: int):
    store, index, embedder = MemoryStore(), InMemoryVectorIndex(), FakeEmbedder(8)
    await index.ensure_collection("episodes", 8)
    session = await store.uow.run(lambda tx: writes.create_session(tx, "s", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"turn {i}", "ok")
                                                          for i in range(count)]))
    return store, index, embedder, session.id


async def test_catching_up_embeds_at_most_max_jobs_and_counts_the_rest() -> None:
    store, index, embedder, sid = await _pending_episodes(3)
    fresh = ReadYourWrites(store, IndexingService(store, index, embedder), max_jobs=2, max_seconds=60)
    assert await fresh.catch_up(["episodes"], OutboxScope(session_id=sid)) == 1
    assert await index.count("episodes") == 2
    assert await fresh.catch_up(["episodes"], OutboxScope(session_id=sid)) == 0


async def test_catching_up_with_the_embedder_down_leaves_the_jobs_and_counts_them() -> None:
    store, index, embedder, sid = await _pending_episodes(2)
    embedder.go_down()
    fresh = ReadYourWrites(store, IndexingService(store, index, embedder), max_jobs=8, max_seconds=60)
    assert await fresh.catch_up(["episodes"], OutboxScope(session_id=sid)) == 2
    assert [j.attempts for j in (await store.outbox.pending_in_scope("episodes", OutboxScope(), 8)).jobs] == [0, 0]
    # Given back due at once, not held for a claim's lease: the worker retries them on its next pass.
    assert len(await store.outbox.claim(8, datetime.now(UTC))) == 2


async def test_a_record_a_drainer_has_in_flight_is_left_to_it_and_counted() -> None:
    store, index, embedder, sid = await _pending_episodes(1)
    [in_flight] = await store.outbox.claim(8, datetime.now(UTC))  # a worker is embedding the first text
    await store.uow.run(lambda tx: writes.update_episode(tx, in_flight.ref_id, EpisodeChanges(user_message="edited")))
    fresh = ReadYourWrites(store, IndexingService(store, index, embedder), max_jobs=8, max_seconds=60)
    # Embedding the edit now could land before the worker's older vector, which would then win.
    assert await fresh.catch_up(["episodes"], OutboxScope(session_id=sid)) == 2
    assert embedder.calls == [] and await index.count("episodes") == 0


async def test_counting_only_embeds_nothing() -> None:
    store, index, embedder, sid = await _pending_episodes(2)
    fresh = ReadYourWrites(store, IndexingService(store, index, embedder))
    assert await fresh.catch_up(["episodes"], OutboxScope(session_id=sid), embed=False) == 2
    assert embedder.calls == []


async def test_an_embedding_cancelled_midway_gives_its_jobs_back_at_once() -> None:
    store, index, embedder, _ = await _pending_episodes(2)
    started = asyncio.Event()

    async def hang(texts):  # an embed still running when the service stops
        started.set()
        await asyncio.Event().wait()

    embedder.embed = hang
    jobs = (await store.outbox.pending_in_scope("episodes", OutboxScope(), 8)).jobs
    task = asyncio.create_task(IndexingService(store, index, embedder).index_now("episodes", jobs))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Due again now, not held for the claim's lease after a restart.
    assert len(await store.outbox.claim(8, datetime.now(UTC))) == 2
