"""The embedding write path, over the in-memory doubles of every port."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.store import InMemoryMemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from domain.indexing import MAX_DELAY, IndexingService, backoff_delay
from domain.models import EpisodeChanges, NewEntity, NewEpisode, NewSummary
from domain.vectors import VectorFilter

DIM = 8


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(seconds=1)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
async def world():
    store, index, embedder, clock = InMemoryMemoryStore(), InMemoryVectorIndex(), FakeEmbedder(DIM), Clock()
    service = IndexingService(store, index, embedder, clock=clock)
    await service.ensure_collections()
    session = await store.create_session("s", {})
    return store, index, embedder, clock, service, session.id


async def drain(service: IndexingService, clock: Clock, passes: int = 50) -> None:
    for _ in range(passes):
        result = await service.run_once(64)
        if not result.done and not result.deferred:
            return
        if result.deferred:
            clock.advance(MAX_DELAY * 2)


async def test_an_episode_becomes_vector_searchable_after_the_worker_runs(world):
    store, index, embedder, clock, service, sid = world
    [episode] = await store.add_episodes([NewEpisode(sid, "I adopted a cat", "Lovely")])
    assert await index.count("episodes") == 0
    await drain(service, clock)
    [vector] = await embedder.embed([episode.text])
    hits = await index.search("episodes", vector, 5)
    assert hits[0].id == episode.id and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert episode.text in embedder.embedded
    assert (await store.backlog()).pending == 0


async def test_points_carry_the_session_and_creation_time_so_search_can_filter(world):
    store, index, embedder, clock, service, sid = world
    other = (await store.create_session("other", {})).id
    await store.add_episodes([NewEpisode(sid, "alpha", "beta"), NewEpisode(other, "alpha", "beta")])
    await drain(service, clock)
    [vector] = await embedder.embed(["User: alpha\nAssistant: beta"])
    hits = await index.search("episodes", vector, 10, VectorFilter(session_id=other))
    assert [h.id for h in hits] == [2]


async def test_embedder_down_keeps_the_jobs_and_they_drain_exactly_once_after_recovery(world):
    store, index, embedder, clock, service, sid = world
    embedder.go_down()
    await store.add_episodes([NewEpisode(sid, f"message {i}", "reply") for i in range(5)])
    result = await service.run_once(64)
    assert result.deferred == 5 and result.done == 0
    backlog = await store.backlog()
    assert backlog.pending == 5 and backlog.failing == 5 and "down" in backlog.last_error
    assert await service.run_once(64) == type(result)()  # hidden until the retry time
    embedder.recover()
    clock.advance(MAX_DELAY * 2)
    await drain(service, clock)
    assert await index.count("episodes") == 5
    assert (await store.backlog()).pending == 0
    texts = embedder.embedded
    assert len(texts) == len(set(texts)) == 5


async def test_backoff_doubles_with_jitter_and_is_capped():
    assert backoff_delay(0, rng=lambda: 0.5) == pytest.approx(0.5)
    assert backoff_delay(3, rng=lambda: 0.5) == pytest.approx(4.0)
    assert backoff_delay(50, rng=lambda: 0.5) == pytest.approx(MAX_DELAY)
    assert backoff_delay(2, rng=lambda: 0.0) == pytest.approx(1.0)
    assert backoff_delay(2, rng=lambda: 1.0) == pytest.approx(3.0)


async def test_deleting_a_session_removes_the_points_of_its_episodes_and_summaries(world):
    store, index, embedder, clock, service, sid = world
    keep = (await store.create_session("keep", {})).id
    await store.add_episodes([NewEpisode(sid, "one", "two"), NewEpisode(keep, "three", "four")])
    await store.add_summary(NewSummary(sid, "a summary"))
    await drain(service, clock)
    assert await index.count("episodes") == 2 and await index.count("summaries") == 1
    await store.delete_session(sid)
    await drain(service, clock)
    assert await index.count("episodes") == 1 and await index.count("summaries") == 0


async def test_deleting_an_episode_entity_or_summary_removes_its_point(world):
    store, index, embedder, clock, service, sid = world
    [episode] = await store.add_episodes([NewEpisode(sid, "one", "two")])
    entity = (await store.upsert_entity(NewEntity("Tom", "cat"))).item
    summary = await store.add_summary(NewSummary(sid, "summary"))
    await drain(service, clock)
    assert [await index.count(c) for c in ("episodes", "entities", "summaries")] == [1, 1, 1]
    await store.delete_episode(episode.id)
    await store.delete_entity(entity.id)
    await store.delete_summary(summary.id)
    await drain(service, clock)
    assert [await index.count(c) for c in ("episodes", "entities", "summaries")] == [0, 0, 0]


async def test_an_episode_deleted_before_it_was_embedded_leaves_no_point(world):
    store, index, embedder, clock, service, sid = world
    [episode] = await store.add_episodes([NewEpisode(sid, "short lived", "gone")])
    await store.delete_episode(episode.id)
    await drain(service, clock)
    assert await index.count("episodes") == 0
    assert (await store.backlog()).pending == 0


async def test_patching_an_episode_re_embeds_its_new_text(world):
    store, index, embedder, clock, service, sid = world
    [episode] = await store.add_episodes([NewEpisode(sid, "old words", "reply")])
    await drain(service, clock)
    changed = await store.update_episode(episode.id, EpisodeChanges(user_message="new words"))
    await drain(service, clock)
    [vector] = await embedder.embed([changed.text])
    [hit] = await index.search("episodes", vector, 1)
    assert hit.id == episode.id and hit.score == pytest.approx(1.0, abs=1e-5)
    assert await index.count("episodes") == 1


async def test_entities_are_embedded_from_name_type_and_notes(world):
    store, index, embedder, clock, service, sid = world
    entity = (await store.upsert_entity(NewEntity("Tom", "cat", "grey and fluffy"))).item
    await drain(service, clock)
    [vector] = await embedder.embed(["Tom\ncat\ngrey and fluffy"])
    [hit] = await index.search("entities", vector, 1)
    assert hit.id == entity.id and hit.score == pytest.approx(1.0, abs=1e-5)


async def test_a_failing_vector_index_defers_the_jobs_without_losing_them(world):
    store, index, embedder, clock, service, sid = world
    await store.add_episodes([NewEpisode(sid, "kept", "safe")])
    broken = IndexingService(store, InMemoryVectorIndex(), embedder, clock=clock)  # no collections: every call fails
    result = await broken.run_once(64)
    assert result.deferred == 1 and (await store.backlog()).pending == 1
    clock.advance(MAX_DELAY * 2)
    await drain(service, clock)
    assert await index.count("episodes") == 1
