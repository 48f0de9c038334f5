"""Two drainers (replicas) over one store, one of them slow: a record edited while the slow one
embeds its old text ends with the new text's vector, and a job the slow one lost with its lease
is left to the drainer that claimed it since, on every store adapter."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.vector_index import InMemoryVectorIndex
from domain import writes
from domain.indexing import IndexingService
from domain.models import EpisodeChanges, NewEpisode
from domain.outbox import CLAIM_LEASE
from domain.record_kinds import KINDS
from ports.store import Store
from tests.contract.store_helpers import a_session

DIM = 8


class HeldEmbedder(FakeEmbedder):
    """Embeds only once let go: a replica slow in the middle of a job."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.entered, self.release = asyncio.Event(), asyncio.Event()

    async def embed(self, texts):
        self.entered.set()
        await self.release.wait()
        return await super().embed(texts)


def _unit(vector) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [round(x / norm, 4) for x in vector]


async def test_a_slow_drainer_never_leaves_an_edited_records_old_vector_in_the_index(store: Store) -> None:
    index = InMemoryVectorIndex()
    await index.ensure_collection("episodes", DIM)
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "first text", "ok")]))
    slow_embedder, fast_embedder = HeldEmbedder(), FakeEmbedder(DIM)
    slow, fast = IndexingService(store, index, slow_embedder), IndexingService(store, index, fast_embedder)

    slow_pass = asyncio.create_task(slow.run_once())
    await slow_embedder.entered.wait()  # it has the first text in hand
    await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(user_message="second text")))
    assert (await fast.run_once()).done == 0  # the record is in flight on the slow replica
    slow_embedder.release.set()
    assert (await slow_pass).done == 1
    assert (await fast.run_once()).done == 1  # now the edit's job

    [current] = await KINDS["episodes"].load(store, [episode.id])
    [expected] = await FakeEmbedder(DIM).embed([KINDS["episodes"].text(current)])
    stored = (await index.retrieve_vectors("episodes", [episode.id]))[episode.id]
    assert _unit(stored) == _unit(expected)
    assert (await store.outbox.backlog()).pending == 0


async def test_a_drainer_whose_lease_ran_out_leaves_the_job_to_the_one_that_claimed_it_since(store: Store) -> None:
    index = InMemoryVectorIndex()
    await index.ensure_collection("episodes", DIM)
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "text", "ok")]))
    now = [datetime.now(UTC)]
    slow_embedder, late_embedder = HeldEmbedder(), HeldEmbedder()
    slow = IndexingService(store, index, slow_embedder, clock=lambda: now[0])
    late = IndexingService(store, index, late_embedder, clock=lambda: now[0])

    slow_pass = asyncio.create_task(slow.run_once())
    await slow_embedder.entered.wait()
    now[0] += CLAIM_LEASE  # the slow replica's lease runs out
    late_pass = asyncio.create_task(late.run_once())
    await late_embedder.entered.wait()  # and the job is claimed again

    slow_embedder.release.set()
    assert (await slow_pass).done == 0
    assert [j.ref_id for j in await store.outbox.due(10, now[0] + CLAIM_LEASE)] == [episode.id]
    assert [e.op for e in await store.events.after(0, 100)].count("embedded") == 0
    late_embedder.release.set()
    assert (await late_pass).done == 1
    assert (await store.outbox.backlog()).pending == 0
    assert [e.op for e in await store.events.after(0, 100)].count("embedded") == 1
