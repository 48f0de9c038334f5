"""Several processes serving one store (a Qdrant server as their index): each one's index manager
serves and writes, one at a time maintains — the holder of the store's maintenance lock — and a
follower takes the maintenance over when the holder goes. In-memory doubles of every port, the
Qdrant server adapter's code through qdrant-client's local mode."""

from __future__ import annotations

import asyncio

import pytest
from qdrant_client import AsyncQdrantClient

from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.maintenance_lock import InMemoryMaintenanceLock, LockCell
from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.qdrant.server import QdrantServerIndex
from domain import writes
from domain.index_manager import IndexManager
from domain.models import EpisodeChanges
from domain.vectors import decode_vector
from tests.unit.test_index_manager import DIM, World, switched

BACKENDS = [pytest.param(InMemoryVectorIndex, id="memory"), pytest.param(QdrantServerIndex.in_memory, id="server-local")]


def managers(world: World, embedder: FakeEmbedder) -> tuple[IndexManager, IndexManager, InMemoryMaintenanceLock]:
    """Two managers over one store and index, as two worker processes have them, and the first's
    lock handle (its process lets it go at shutdown, once the index is closed)."""
    cell = LockCell()
    first_lock = InMemoryMaintenanceLock(cell)
    first, second = (IndexManager(world.index, world.catalog, world.store, embedder, "fake", lock=lock,
                                  verify_seconds=0.05, check_seconds=0.01)
                     for lock in (first_lock, InMemoryMaintenanceLock(cell)))
    return first, second, first_lock


async def until(predicate, rounds: int = 2000):
    for _ in range(rounds):
        if value := predicate():
            return value
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_one_manager_maintains_and_the_other_follows_its_generations(backend) -> None:
    world, embedder = World(backend()), FakeEmbedder(DIM)
    first, second, first_lock = managers(world, embedder)
    await first.start()
    await world.add(6)
    await world.drain(first, embedder)
    await second.start()
    assert first.status()["maintaining"] and not second.status()["maintaining"]
    assert second.status()["status"] == "consistent"
    assert len(await second.search("episodes", [1.0] * DIM, 10)) == 6  # the maintainer's generation

    first.request_rebuild("episodes", "a test")
    await switched(first)
    second.run()  # it follows the manifest: the new generation, once the old is gone
    new = first.status()["collections"]["episodes"]["generation"]
    await until(lambda: second.status()["collections"]["episodes"]["generation"] == new)
    await world.add(2)
    await world.drain(second, embedder)  # the follower's writes reach the generation that serves
    assert await first.count("episodes") == 8 and len(await second.search("episodes", [1.0] * DIM, 10)) == 8
    assert second.builds == 0 and second.repairs == 0  # it never maintained
    await first.close()
    await second.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_follower_takes_the_maintenance_over_when_the_holder_goes(backend) -> None:
    world, embedder = World(backend()), FakeEmbedder(DIM)
    first, second, first_lock = managers(world, embedder)
    await first.start()
    await world.add(4)
    await world.drain(first, embedder)
    await second.start()
    second.run()
    await first.close()
    assert not second.maintaining  # the lock is still held: the first process has not let it go
    await first_lock.release()  # its process shut down (the kernel drops a dead process's flock the same way)
    await until(lambda: second.maintaining)
    second.request_rebuild("episodes", "a test")
    status = await switched(second)
    assert status["maintaining"] and await second.count("episodes") == 4 and second.builds == 1
    await second.close()


async def test_a_follower_with_no_generation_of_its_model_yet_says_the_maintainer_builds_it() -> None:
    world = World()
    cell = LockCell()
    maintainer = IndexManager(world.index, world.catalog, world.store, FakeEmbedder(DIM), "fake",
                              lock=InMemoryMaintenanceLock(cell))
    await maintainer.start()
    follower = IndexManager(world.index, world.catalog, world.store, FakeEmbedder(DIM, model="other"), "fake",
                            lock=InMemoryMaintenanceLock(cell))
    await follower.start()
    episodes = follower.status()["collections"]["episodes"]
    assert not follower.maintaining and episodes["state"] == "unavailable"
    assert "being built by the process maintaining the index (pid" in follower.problem()
    await maintainer.close()
    await follower.close()


async def test_a_maintainer_that_lost_its_lock_follows_the_new_holder() -> None:
    world, embedder = World(InMemoryVectorIndex()), FakeEmbedder(DIM)
    cell = LockCell()
    first, second = (IndexManager(world.index, world.catalog, world.store, embedder, "fake",
                                  lock=InMemoryMaintenanceLock(cell), verify_seconds=0.05, check_seconds=0.01)
                     for _ in range(2))
    await first.start()
    await world.add(3)
    await world.drain(first, embedder)
    first.run()
    cell.owner = None  # its database session ended, and the lock with it
    await second.start()
    assert second.maintaining
    await until(lambda: not first.maintaining)
    assert first.status()["status"] == "consistent"
    assert len(await first.search("episodes", [1.0] * DIM, 10)) == 3  # served from the new holder's generation
    await first.close()
    await second.close()


def _paused_after_streaming(base):
    """The backend, with a hook run once when a build has streamed its points and before the switch:
    the moment another process's writes are behind the build and unknown to its process."""

    class Paused(base):
        during = None

        async def build_collection(self, name, dimension, batches):
            await super().build_collection(name, dimension, batches)
            if self.during is not None:
                hook, self.during = self.during, None
                await hook()

    return Paused() if base is InMemoryVectorIndex else Paused(AsyncQdrantClient(":memory:"), server_features=False,
                                                               persistent=False)


def _unit(vector) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


@pytest.mark.parametrize("backend", [pytest.param(InMemoryVectorIndex, id="memory"),
                                     pytest.param(QdrantServerIndex, id="server-local")])
async def test_a_followers_writes_during_a_build_reach_the_new_generation_with_their_new_text(backend) -> None:
    index = _paused_after_streaming(backend)
    world, embedder = World(index), FakeEmbedder(DIM)
    first, second, _ = managers(world, embedder)
    await first.start()
    edited, *_ = await world.add(4)
    await world.drain(first, embedder)
    await second.start()
    before = (await first.retrieve_vectors("episodes", [edited]))[edited]

    async def follower_writes() -> None:
        await world.store.uow.run(lambda tx: writes.update_episode(tx, edited, EpisodeChanges(user_message="rewritten")))
        await world.add(2, "late")
        await world.drain(second, embedder)  # into the generation serving now: the build's process never hears of it

    index.during = follower_writes
    first.request_rebuild("episodes", "a test")
    await switched(first)
    assert await first.count("episodes") == 6
    [row] = await world.catalog.embeddings_of("episodes", first._model_id, [edited])
    served = (await first.retrieve_vectors("episodes", [edited]))[edited]
    assert served == pytest.approx(_unit(decode_vector(row.vector)), abs=1e-3)  # the rewritten text's vector
    assert served != pytest.approx(before, abs=1e-3)
    await first.close()
    await second.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_follower_writes_through_the_alias_into_a_generation_switched_since_it_last_looked(backend) -> None:
    world, embedder = World(backend()), FakeEmbedder(DIM)
    first, second, _ = managers(world, embedder)
    await first.start()
    await world.add(6)
    await world.drain(first, embedder)
    await second.start()  # it follows, and is not run: it never looks at the manifest again
    first.request_rebuild("episodes", "a test")
    await switched(first)
    await world.add(2)
    await world.drain(second, embedder)
    assert await first.count("episodes") == 8
    assert len(await second.search("episodes", [1.0] * DIM, 10)) == 8
    assert (await world.store.outbox.backlog()).pending == 0
    await first.close()
    await second.close()
