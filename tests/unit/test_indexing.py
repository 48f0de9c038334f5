"""The embedding write path, over the in-memory doubles of every port."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from adapters.memory.catalog import InMemoryIndexCatalog
from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from domain import writes
from domain.errors import VectorIndexError
from domain.index_manager import IndexManager
from domain.indexing import MAX_DELAY, IndexingService, backoff_delay
from domain.models import EpisodeChanges, NewEntity, NewEpisode, NewSummary
from domain.outbox import CLAIM_LEASE
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
    store, embedder, clock = MemoryStore(), FakeEmbedder(DIM), Clock()
    # The services write through the index manager, which routes to the active generations.
    index = IndexManager(InMemoryVectorIndex(), InMemoryIndexCatalog(store), store, embedder, "fake")
    await index.start()
    service = IndexingService(store, index, embedder, clock=clock)
    session = await store.uow.run(lambda tx: writes.create_session(tx, "s", {}))
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
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "I adopted a cat", "Lovely")]))
    assert await index.count("episodes") == 0
    await drain(service, clock)
    [vector] = await embedder.embed([episode.text])
    hits = await index.search("episodes", vector, 5)
    assert hits[0].id == episode.id and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert episode.text in embedder.embedded
    assert (await store.outbox.backlog()).pending == 0


async def test_points_carry_the_session_and_creation_time_so_search_can_filter(world):
    store, index, embedder, clock, service, sid = world
    other = (await store.uow.run(lambda tx: writes.create_session(tx, "other", {}))).id
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "alpha", "beta"), NewEpisode(other, "alpha", "beta")]))
    await drain(service, clock)
    [vector] = await embedder.embed(["User: alpha\nAssistant: beta"])
    hits = await index.search("episodes", vector, 10, VectorFilter(session_id=other))
    assert [h.id for h in hits] == [2]


async def test_embedder_down_keeps_the_jobs_and_they_drain_exactly_once_after_recovery(world):
    store, index, embedder, clock, service, sid = world
    embedder.go_down()
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, f"message {i}", "reply") for i in range(5)]))
    result = await service.run_once(64)
    assert result.deferred == 5 and result.done == 0
    backlog = await store.outbox.backlog()
    assert backlog.pending == 5 and backlog.failing == 5 and "down" in backlog.last_error
    assert await service.run_once(64) == type(result)()  # hidden until the retry time
    embedder.recover()
    clock.advance(MAX_DELAY * 2)
    await drain(service, clock)
    assert await index.count("episodes") == 5
    assert (await store.outbox.backlog()).pending == 0
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
    keep = (await store.uow.run(lambda tx: writes.create_session(tx, "keep", {}))).id
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "one", "two"), NewEpisode(keep, "three", "four")]))
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(sid, "a summary")))
    await drain(service, clock)
    assert await index.count("episodes") == 2 and await index.count("summaries") == 1
    await store.uow.run(lambda tx: writes.delete_session(tx, sid))
    await drain(service, clock)
    assert await index.count("episodes") == 1 and await index.count("summaries") == 0


async def test_deleting_an_episode_entity_or_summary_removes_its_point(world):
    store, index, embedder, clock, service, sid = world
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "one", "two")]))
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Tom", "cat")))).item
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(sid, "summary")))
    await drain(service, clock)
    assert [await index.count(c) for c in ("episodes", "entities", "summaries")] == [1, 1, 1]
    await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id))
    await store.uow.run(lambda tx: writes.delete_entity(tx, entity.id))
    await store.uow.run(lambda tx: writes.delete_summary(tx, summary.id))
    await drain(service, clock)
    assert [await index.count(c) for c in ("episodes", "entities", "summaries")] == [0, 0, 0]


async def test_an_episode_deleted_before_it_was_embedded_leaves_no_point(world):
    store, index, embedder, clock, service, sid = world
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "short lived", "gone")]))
    await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id))
    await drain(service, clock)
    assert await index.count("episodes") == 0
    assert (await store.outbox.backlog()).pending == 0


async def test_patching_an_episode_re_embeds_its_new_text(world):
    store, index, embedder, clock, service, sid = world
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "old words", "reply")]))
    await drain(service, clock)
    changed = await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(user_message="new words")))
    await drain(service, clock)
    [vector] = await embedder.embed([changed.text])
    [hit] = await index.search("episodes", vector, 1)
    assert hit.id == episode.id and hit.score == pytest.approx(1.0, abs=1e-5)
    assert await index.count("episodes") == 1


async def test_entities_are_embedded_from_name_type_and_notes(world):
    store, index, embedder, clock, service, sid = world
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Tom", "cat", "grey and fluffy")))).item
    await drain(service, clock)
    [vector] = await embedder.embed(["Tom\ncat\ngrey and fluffy"])
    [hit] = await index.search("entities", vector, 1)
    assert hit.id == entity.id and hit.score == pytest.approx(1.0, abs=1e-5)


async def test_a_failing_vector_index_defers_the_jobs_without_losing_them(world):
    store, index, embedder, clock, service, sid = world
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "kept", "safe")]))
    broken = IndexingService(store, InMemoryVectorIndex(), embedder, clock=clock)  # no collections: every call fails
    result = await broken.run_once(64)
    assert result.deferred == 1 and (await store.outbox.backlog()).pending == 1
    clock.advance(MAX_DELAY * 2)
    await drain(service, clock)
    assert await index.count("episodes") == 1


# -- poison records ---------------------------------------------------------------------
async def _episodes(store, sid, count, poison_at=()):
    texts = [("POISON " if i in poison_at else "") + f"message {i}" for i in range(count)]
    return await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, text, "reply") for text in texts]))


@pytest.mark.parametrize("permanent", [True, False])
async def test_one_poison_record_does_not_hold_back_the_others_in_its_pass(world, permanent):
    store, index, embedder, clock, service, sid = world
    episodes = await _episodes(store, sid, 40, poison_at={17})
    embedder.refuse("POISON", permanent=permanent)
    result = await service.run_once(64)
    assert result.done == 39 and result.deferred == 1
    assert await index.count("episodes") == 39
    backlog = await store.outbox.backlog()
    assert backlog.pending == 1 and backlog.failing == 1 and "POISON" in backlog.last_error
    [job] = await store.outbox.due(10, clock.now + timedelta(days=1))
    assert job.ref_id == episodes[17].id


async def test_a_poison_record_becomes_a_dead_letter_after_the_attempt_limit(world):
    store, index, embedder, clock, service, sid = world
    episodes = await _episodes(store, sid, 5, poison_at={2})
    embedder.refuse("POISON")
    await drain(service, clock)
    assert service.max_attempts == 5
    backlog = await store.outbox.backlog()
    assert (backlog.pending, backlog.dead) == (0, 1)
    [dead] = await store.outbox.dead(10)
    assert dead.ref_id == episodes[2].id and dead.attempts == 5 and dead.dead_at
    assert service.dead_lettered == 1
    calls = len(embedder.calls)
    assert (await service.run_once(64)).done == 0 and len(embedder.calls) == calls  # never retried alone


async def test_a_retried_dead_letter_is_indexed_once_the_embedder_accepts_it(world):
    store, index, embedder, clock, service, sid = world
    await _episodes(store, sid, 3, poison_at={0})
    embedder.refuse("POISON")
    await drain(service, clock)
    assert (await store.outbox.backlog()).dead == 1
    embedder.poison.clear()
    assert await store.outbox.retry_dead() == 1
    await drain(service, clock)
    assert await index.count("episodes") == 3
    assert (await store.outbox.backlog()) .dead == 0


async def test_an_outage_defers_every_job_and_never_makes_dead_letters(world):
    store, index, embedder, clock, service, sid = world
    await _episodes(store, sid, 8)
    embedder.go_down()
    for _ in range(service.max_attempts * 3):
        result = await service.run_once(64)
        assert result.dead == 0
        clock.advance(MAX_DELAY * 2)
    assert len(embedder.calls) == service.max_attempts * 3  # one call per pass: no splitting in an outage
    backlog = await store.outbox.backlog()
    assert (backlog.pending, backlog.dead) == (8, 0)
    embedder.recover()
    await drain(service, clock)
    assert await index.count("episodes") == 8


async def test_an_index_failing_during_isolation_defers_without_dead_letters(world):
    store, index, embedder, clock, service, sid = world
    await _episodes(store, sid, 8, poison_at={1})
    embedder.refuse("POISON")
    calls = 0
    original = index.upsert

    async def upsert_then_break(collection, points):
        nonlocal calls
        calls += 1
        if calls > 1:
            raise VectorIndexError("the index went away (test)")
        await original(collection, points)

    index.upsert = upsert_then_break
    service.max_attempts = 1  # any record failing alone would be buried at once
    result = await service.run_once(64)
    assert result.dead <= 1  # only the refused record itself can be buried
    backlog = await store.outbox.backlog()
    assert backlog.dead + backlog.pending + result.done == 8
    assert all("POISON" in j.last_error or "index" in j.last_error for j in await store.outbox.dead(10))
    assert not [j for j in await store.outbox.dead(10) if "index" in j.last_error]


# -- a worker that lost its lease ---------------------------------------------------------------
class StalledEmbedder(FakeEmbedder):
    """Answers only once let go: a worker stalled mid-job (a slow backend, a paused process)."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.entered, self.let_go = asyncio.Event(), asyncio.Event()

    async def embed(self, texts):
        self.entered.set()
        await self.let_go.wait()
        return await super().embed(texts)


async def _stalled_pass(service: IndexingService, embedder: StalledEmbedder) -> asyncio.Task:
    running = asyncio.create_task(service.run_once(64))
    await embedder.entered.wait()
    return running


async def _embedded_events(store) -> list[int]:
    return [e.record_id for e in await store.events.after(0, 1000) if e.op == "embedded"]


async def test_a_worker_that_lost_its_lease_leaves_the_new_holders_job_to_it(world):
    store, index, _, clock, _, sid = world
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "slow words", "reply")]))
    first_embedder, second_embedder = StalledEmbedder(), StalledEmbedder()
    first = IndexingService(store, index, first_embedder, clock=clock)
    second = IndexingService(store, index, second_embedder, clock=clock)
    first_pass = await _stalled_pass(first, first_embedder)
    clock.advance(CLAIM_LEASE.total_seconds())  # the first worker's lease runs out
    second_pass = await _stalled_pass(second, second_embedder)  # and the second claims the job

    first_embedder.let_go.set()
    result = await first_pass
    assert (result.done, result.deferred, result.dead) == (0, 0, 0)
    assert (await store.outbox.backlog()).pending == 1  # the job is still there, the second's
    assert await _embedded_events(store) == []

    second_embedder.let_go.set()
    assert (await second_pass).done == 1
    assert (await store.outbox.backlog()).pending == 0
    assert await _embedded_events(store) == [episode.id]


@pytest.mark.parametrize("failure", ["outage", "poison"])
async def test_a_worker_that_lost_its_lease_neither_defers_nor_buries_the_new_holders_job(world, failure):
    store, index, _, clock, _, sid = world
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(sid, "POISON words", "reply")]))
    first_embedder, second_embedder = StalledEmbedder(), StalledEmbedder()
    first = IndexingService(store, index, first_embedder, clock=clock, max_attempts=1)
    second = IndexingService(store, index, second_embedder, clock=clock)
    first_pass = await _stalled_pass(first, first_embedder)
    clock.advance(CLAIM_LEASE.total_seconds())
    second_pass = await _stalled_pass(second, second_embedder)

    if failure == "outage":
        first_embedder.go_down()
    else:
        first_embedder.refuse("POISON")  # the first attempt is the last one allowed: a dead letter
    first_embedder.let_go.set()
    result = await first_pass
    assert (result.done, result.deferred, result.dead, first.dead_lettered) == (0, 0, 0, 0)
    [job] = await store.outbox.due(10, clock.now + CLAIM_LEASE)
    assert (job.attempts, job.last_error, job.dead_at) == (0, None, None)
    assert await store.outbox.claim(10, clock.now) == []  # still held by the second worker

    second_embedder.let_go.set()
    assert (await second_pass).done == 1
    assert (await store.outbox.backlog()).pending == 0
