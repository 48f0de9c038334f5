"""The index manager over the in-memory doubles of every port: generations, model changes, lost
and damaged collections, writes during a build, and a crash at every step of a switch."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from adapters.memory.catalog import InMemoryIndexCatalog
from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.memory.maintenance_lock import InMemoryMaintenanceLock
from adapters.qdrant.edge import QdrantEdgeIndex
from adapters.qdrant.server import QdrantServerIndex
from domain import writes
from domain.errors import VectorIndexError
from domain.index_manager import IndexManager
from domain.index_status import CATCHING_UP, INDEXING, Progress
from domain.indexing import IndexingService
from domain.models import EpisodeChanges, NewEpisode
from domain.vectors import VectorFilter, VectorPoint, decode_vector

DIM = 8


class World:
    """One store, catalog and index that outlive the managers a test starts over them (a restart)."""

    def __init__(self, index=None) -> None:
        self.store = MemoryStore()
        self.catalog = InMemoryIndexCatalog(self.store)
        self.index = index or InMemoryVectorIndex()
        self.session = 0

    def manager(self, embedder: FakeEmbedder, catalog=None, index=None, lock=None) -> IndexManager:
        return IndexManager(index or self.index, catalog or self.catalog, self.store, embedder, "fake",
                            verify_seconds=0.05, check_seconds=0.01, lock=lock)

    async def add(self, n: int, text: str = "note", expires_at: str | None = None) -> list[int]:
        if not self.session:
            self.session = (await self.store.uow.run(lambda tx: writes.create_session(tx, "s", {}))).id
        made = await self.store.uow.run(lambda tx: writes.add_episodes(
            tx, [NewEpisode(self.session, f"{text} {i}", "ok", expires_at=expires_at) for i in range(n)]))
        return [e.id for e in made]

    async def drain(self, manager: IndexManager, embedder: FakeEmbedder) -> None:
        service = IndexingService(self.store, manager, embedder, clock=lambda: datetime.now(UTC) + timedelta(hours=1))
        while (await service.run_once(64)).done:
            pass


async def until_consistent(manager: IndexManager, rounds: int = 2000) -> dict:
    """Let the background task work until every collection is consistent (bounded)."""
    manager.run()
    for _ in range(rounds):
        status = manager.status()
        if status["status"] == "consistent":
            return status
        await asyncio.sleep(0.01)
    raise AssertionError(f"the index never became consistent: {manager.status()}")


async def switched(manager: IndexManager, builds: int = 1, rounds: int = 2000) -> dict:
    """Wait (bounded) until ``builds`` builds have switched, then until everything is consistent."""
    manager.run()
    for _ in range(rounds):
        if manager.builds >= builds:
            return await until_consistent(manager)
        await asyncio.sleep(0.01)
    raise AssertionError(f"no switch happened: {manager.status()}")


async def points_and_rows(world: World, manager: IndexManager) -> tuple[int, int]:
    return await manager.count("episodes"), len(world.store.state.episodes)


async def test_a_fresh_store_is_consistent_at_once_without_a_build() -> None:
    world = World()
    manager = world.manager(FakeEmbedder(DIM))
    await manager.start()
    assert manager.status()["status"] == "consistent" and manager.builds == 0
    assert await manager.search("episodes", [1.0] * DIM, 3) == []


# The Qdrant server adapter gets the same guarantees; qdrant-client's local mode runs its code.
BACKENDS = [pytest.param(InMemoryVectorIndex, id="memory"), pytest.param(QdrantServerIndex.in_memory, id="server-local")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("new", [FakeEmbedder(DIM, model="other"), FakeEmbedder(DIM * 2)],
                         ids=["model-same-dimension", "dimension"])
async def test_a_changed_model_rebuilds_in_the_background_and_switches(new: FakeEmbedder, backend) -> None:
    world, old = World(backend()), FakeEmbedder(DIM)
    first = world.manager(old)
    await first.start()
    await world.add(5)
    await world.drain(first, old)
    assert await first.count("episodes") == 5
    await first.close()

    second = world.manager(new)
    await second.start()  # not an error, and no build waited for
    with pytest.raises(VectorIndexError, match="embedding model changed"):
        await second.search("episodes", [1.0] * new.dimension, 3)
    await world.add(2)
    await world.drain(second, new)  # writes while rebuilding are accepted, kept in the store
    status = await until_consistent(second)
    assert await points_and_rows(world, second) == (7, 7)
    assert status["collections"]["episodes"]["model"] == f"fake:{new.model} ({new.dimension}-d cosine)"
    assert len(await second.search("episodes", [1.0] * new.dimension, 10)) == 7
    generations = await world.catalog.generations()
    assert {g.model.model for g in generations} == {new.model}  # the old generation is dropped
    assert len(await world.index.collections()) == 3
    await second.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_lost_collection_is_rebuilt_from_stored_embeddings_without_the_embedder(backend) -> None:
    world, embedder = World(backend()), FakeEmbedder(DIM)
    first = world.manager(embedder)
    await first.start()
    await world.add(20)
    await world.drain(first, embedder)
    await first.close()
    for name in await world.index.collections():
        await world.index.drop_collection(name)
    embedder.go_down()
    second = world.manager(embedder)
    await second.start()
    assert second.status()["collections"]["episodes"]["state"] == "unavailable"
    await until_consistent(second)
    assert await points_and_rows(world, second) == (20, 20)
    await second.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_lost_and_stray_points_are_repaired_in_place_by_verification(backend) -> None:
    world, embedder = World(backend()), FakeEmbedder(DIM)
    manager = world.manager(embedder)
    await manager.start()
    ids = await world.add(200)
    await world.drain(manager, embedder)
    physical = manager.status()["collections"]["episodes"]["generation"]
    await world.index.delete(physical, ids[:30])
    stray = (await world.catalog.embeddings_of("episodes", 1, ids[30:31]))[0]
    await world.index.upsert(physical, [VectorPoint(10_000, decode_vector(stray.vector), stray.payload)])
    embedder.go_down()  # repair reads stored embeddings; it must not need the embedder
    assert await manager.verify("episodes") == "consistent"
    assert await world.index.point_ids(physical) == ids
    assert manager.repairs == 1 and manager.builds == 0
    await manager.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_record_expired_before_it_was_embedded_is_no_divergence(backend) -> None:
    # The worker does not embed a record that expired before its turn, and searches never return
    # it; until the expiry sweep purges it, verification must not "repair" its absent point on
    # every check (each repair restoring nothing).
    world, embedder = World(backend()), FakeEmbedder(DIM)
    manager = world.manager(embedder)
    await manager.start()
    kept = await world.add(3)
    expired = await world.add(1, "gone", expires_at="2001-01-01T00:00:00.000Z")
    await world.drain(manager, embedder)
    physical = manager.status()["collections"]["episodes"]["generation"]
    for _ in range(3):
        assert await manager.verify("episodes") == "consistent"
        await manager.refresh()  # the health interval's count check
        assert manager.status()["collections"]["episodes"]["state"] == "consistent"
    assert manager.repairs == 0 and manager.builds == 0
    assert set(await world.index.point_ids(physical)) == set(kept) and expired[0] not in kept
    await manager.close()


async def test_writes_made_during_a_build_reach_the_new_generation() -> None:
    world, embedder = World(), FakeEmbedder(DIM)
    gate, reached = asyncio.Event(), asyncio.Event()

    class PausingIndex(InMemoryVectorIndex):
        async def build_collection(self, name, dimension, batches):
            async def paused():
                async for batch in batches:
                    reached.set()
                    await gate.wait()
                    yield batch
            await super().build_collection(name, dimension, paused())

    index = PausingIndex()
    manager = world.manager(embedder, index=index)
    await manager.start()
    ids = await world.add(10)
    await world.drain(manager, embedder)
    await manager.close()
    for name in await index.collections():  # lose the index: the next start rebuilds it
        await index.drop_collection(name)
    manager = world.manager(embedder, index=index)
    await manager.start()
    manager.run()
    await reached.wait()
    added = await world.add(3, text="late")
    await world.store.uow.run(lambda tx: writes.delete_episode(tx, ids[0]))
    await world.store.uow.run(lambda tx: writes.update_episode(tx, ids[1], EpisodeChanges(user_message="rewritten")))
    await world.drain(manager, embedder)
    gate.set()
    await until_consistent(manager)
    physical = manager.status()["collections"]["episodes"]["generation"]
    assert await index.point_ids(physical) == sorted(ids[1:] + added)
    [best] = await manager.search("episodes", (await embedder.embed(["User: rewritten\nAssistant: ok"]))[0], 1)
    assert best.id == ids[1]
    await manager.close()


class CrashingCatalog(InMemoryIndexCatalog):
    """Dies (as a kill -9 would stop everything) at one step of the switch."""

    def __init__(self, store, step: str) -> None:
        super().__init__(store)
        self.step = step

    async def activate(self, generation_id: int) -> None:
        if self.step == "before-activate":
            raise asyncio.CancelledError
        await super().activate(generation_id)
        if self.step == "after-activate":
            raise asyncio.CancelledError


@pytest.mark.parametrize("step", ["before-activate", "after-activate"])
async def test_a_crash_at_any_step_of_the_switch_converges_at_the_next_start(step: str) -> None:
    world, embedder = World(), FakeEmbedder(DIM)
    catalog = CrashingCatalog(world.store, "none")
    manager = world.manager(embedder, catalog=catalog)
    await manager.start()
    await world.add(12)
    await world.drain(manager, embedder)
    await manager.close()

    catalog.step = step
    for name in await world.index.collections():
        await world.index.drop_collection(name)
    crashed = world.manager(embedder, catalog=catalog)
    await crashed.start()
    with pytest.raises(asyncio.CancelledError):
        await crashed.run()
    left = {g.state for g in await catalog.generations()}
    assert "building" in left or "retired" in left or step == "after-activate"

    catalog.step = "none"
    restarted = world.manager(embedder, catalog=catalog)
    await restarted.start()
    await until_consistent(restarted)
    assert await points_and_rows(world, restarted) == (12, 12)
    assert sorted(g.state for g in await catalog.generations()) == ["active"] * 3
    assert len(await world.index.collections()) == 3  # nothing left behind
    await restarted.close()


async def test_a_session_delete_during_a_build_is_replayed_on_the_new_generation() -> None:
    world, embedder = World(), FakeEmbedder(DIM)
    manager = world.manager(embedder)
    await manager.start()
    await world.add(4)
    await world.drain(manager, embedder)
    state = manager._states["episodes"]
    state.dirty = set()  # as during a build
    await manager.delete_by_filter("episodes", VectorFilter(session_id=world.session))
    assert state.dirty_filters == [VectorFilter(session_id=world.session)]
    await manager.close()


async def test_equal_counts_hiding_lost_points_are_found_by_the_sample() -> None:
    world, embedder = World(), FakeEmbedder(DIM)
    manager = world.manager(embedder)
    await manager.start()
    ids = await world.add(40)
    await world.drain(manager, embedder)
    physical = manager.status()["collections"]["episodes"]["generation"]
    await world.index.delete(physical, ids[:35])  # most lost ...
    stray = [VectorPoint(50_000 + i, [1.0] * DIM, {}) for i in range(35)]
    await world.index.upsert(physical, stray)  # ... and as many strays: the counts still agree
    assert await manager.verify("episodes") == "consistent"
    assert await world.index.point_ids(physical) == ids
    await manager.close()


async def test_a_record_the_new_model_refuses_does_not_hold_up_its_rebuild() -> None:
    world = World()
    first = world.manager(FakeEmbedder(DIM))
    await first.start()
    await world.add(6)
    await world.drain(first, FakeEmbedder(DIM))
    await first.close()
    await world.add(1, text="poison")  # its job stays queued: the new model refuses it
    new = FakeEmbedder(DIM, model="other")
    new.refuse("poison")
    second = world.manager(new)
    await second.start()
    status = await until_consistent(second)
    assert status["collections"]["episodes"]["points"] == 6  # every record but the refused one
    await second.close()


# ---- the catch-up after a build: only writes behind the stream, with its own progress ------------

class Gated:
    """Holds a build after its first streamed page, then the first catch-up write onto it."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.built: str | None = None
        self.streamed, self.stream_gate = asyncio.Event(), asyncio.Event()
        self.catching_up, self.catch_up_gate = asyncio.Event(), asyncio.Event()
        self.replayed: list[int] = []

    async def build_collection(self, name, dimension, batches):
        self.built = name

        async def held():
            async for batch in batches:
                yield batch
                self.streamed.set()
                await self.stream_gate.wait()
        await super().build_collection(name, dimension, held())

    async def upsert(self, collection, points):
        if collection == self.built:  # after the build: only the catch-up (and repairs) write here
            self.replayed.extend(p.id for p in points)
            self.catching_up.set()
            await self.catch_up_gate.wait()
        await super().upsert(collection, points)


class GatedIndex(Gated, InMemoryVectorIndex):
    pass


class GatedEdge(Gated, QdrantEdgeIndex):  # an index only this process writes: no aliases
    pass


async def test_the_catch_up_replays_only_writes_behind_the_stream_and_says_so_before_the_switch() -> None:
    world, embedder, index = World(), FakeEmbedder(DIM), GatedIndex()
    manager = world.manager(embedder, index=index)
    await manager.start()
    ids = await world.add(10)
    await world.drain(manager, embedder)
    old = manager.status()["collections"]["episodes"]["generation"]
    manager.request_rebuild("episodes", "a test")
    manager.run()
    await index.streamed.wait()  # the stream has read ids[0..9]; the build holds
    added = await world.add(5, text="new")  # ahead of the stream: it reads them itself
    await world.store.uow.run(lambda tx: writes.update_episode(tx, ids[3], EpisodeChanges(user_message="changed")))
    await world.drain(manager, embedder)  # ids[3] was streamed already: it must be replayed
    index.stream_gate.set()
    await index.catching_up.wait()
    episodes = manager.status()["collections"]["episodes"]
    assert episodes["generation"] == old and episodes["building"] == index.built  # the switch waits
    assert episodes["progress"]["phase"] == "catching up"
    assert (episodes["progress"]["done"], episodes["progress"]["total"]) == (0, 1)
    assert episodes["progress"]["text"].startswith("catching up 0 of 1 writes")
    index.catch_up_gate.set()
    await switched(manager)
    assert index.replayed == [ids[3]]  # not the five new rows the stream read itself
    catch_up = manager.status()["catchUp"]
    assert catch_up["replayed"] == 1 and catch_up["writesDuringBuilds"] >= 6
    assert manager.status()["collections"]["episodes"]["generation"] == index.built
    assert await index.point_ids(index.built) == sorted(ids + added)
    [best] = await manager.search("episodes", (await embedder.embed(["User: changed\nAssistant: ok"]))[0], 1)
    assert best.id == ids[3]
    await manager.close()


def test_progress_has_an_eta_from_its_own_rate_except_while_the_engine_builds_its_graph() -> None:
    catching = Progress(CATCHING_UP, total=100, done=50, started=time.monotonic() - 100)
    assert 99 < catching.eta_seconds() < 102
    assert catching.describe().startswith("catching up 50 of 100 writes made during the build (50%), ETA 10")
    indexing = Progress(INDEXING, total=5000, done=5000)
    assert indexing.eta_seconds() is None and indexing.as_dict()["etaSeconds"] is None
    assert "no ETA" in indexing.describe() and "ETA 0" not in indexing.describe()


# ---- a Qdrant server: the active generation under an alias, moved atomically -----------------

class AliasCrash(QdrantServerIndex):
    """qdrant-client local mode that dies (as kill -9) at one step of the alias switch."""

    step = "none"

    async def point_alias(self, alias, collection):
        if self.step == "before-alias" and alias in await self.aliases():
            raise asyncio.CancelledError
        await super().point_alias(alias, collection)

    async def drop_collection(self, name, keep=False):
        if self.step == "after-alias":
            raise asyncio.CancelledError
        await super().drop_collection(name, keep)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_alias_reads_the_complete_old_generation_until_the_switch_moves_it(backend) -> None:
    world, embedder = World(backend()), FakeEmbedder(DIM)
    manager = world.manager(embedder)
    await manager.start()
    await world.add(6)
    await world.drain(manager, embedder)
    alias, old = manager.alias_of("episodes"), manager.status()["collections"]["episodes"]["generation"]
    assert (await world.index.aliases())[alias] == old and await world.index.count(alias) == 6
    assert manager.status()["collections"]["episodes"]["alias"] == alias
    manager.request_rebuild("episodes", "a test")
    await world.add(3)
    await world.drain(manager, embedder)
    await switched(manager)
    new = manager.status()["collections"]["episodes"]["generation"]
    assert new != old and (await world.index.aliases())[alias] == new
    assert await world.index.count(alias) == 9
    assert old not in await world.index.collections()
    await manager.close()


@pytest.mark.parametrize("step", ["before-activate", "after-activate", "before-alias", "after-alias"])
async def test_a_kill_at_any_step_of_a_server_switch_leaves_the_alias_on_a_whole_generation(step: str) -> None:
    index = AliasCrash.in_memory()
    world, embedder = World(index), FakeEmbedder(DIM)
    catalog = CrashingCatalog(world.store, "none")
    manager = world.manager(embedder, catalog=catalog)
    await manager.start()
    await world.add(8)
    await world.drain(manager, embedder)
    alias, first = manager.alias_of("episodes"), manager.status()["collections"]["episodes"]["generation"]
    await manager.close()

    catalog.step, index.step = (step, "none") if "activate" in step else ("none", step)
    crashed = world.manager(embedder, catalog=catalog)
    await crashed.start()
    crashed.request_rebuild("episodes", "a test")
    with pytest.raises(asyncio.CancelledError):
        await crashed.run()
    named = (await index.aliases())[alias]
    assert named in await index.collections() and await index.count(named) == 8  # whole, never none

    catalog.step, index.step = "none", "none"
    restarted = world.manager(embedder, catalog=catalog)
    await restarted.start()
    await until_consistent(restarted)
    active = restarted.status()["collections"]["episodes"]["generation"]
    assert (await index.aliases())[alias] == active and await index.count(alias) == 8
    assert (active == first) == (step == "before-activate")
    assert len(await index.collections()) == 3  # the retired generation is gone
    await restarted.close()


@pytest.mark.parametrize("shared", [True, False], ids=["shared index", "private index"])
async def test_only_an_index_other_processes_write_into_is_replayed_from_the_change_feed(shared, tmp_path) -> None:
    """With the maintenance lock (another process may serve the store), a build of an index other
    processes write into (aliases: a Qdrant server) replays the store's changes since it began; an
    index private to this process (Qdrant Edge) got every write through this manager, so its
    catch-up is all the replay it needs and the change feed is not copied onto it again."""
    world, embedder = World(), FakeEmbedder(DIM)
    index = GatedIndex() if shared else GatedEdge(tmp_path / "qdrant")
    manager = world.manager(embedder, index=index, lock=InMemoryMaintenanceLock())
    await manager.start()
    ids = await world.add(10)
    await world.drain(manager, embedder)
    manager.request_rebuild("episodes", "a test")
    manager.run()
    await index.streamed.wait()
    added = await world.add(5, text="new")
    await world.store.uow.run(lambda tx: writes.update_episode(tx, ids[3], EpisodeChanges(user_message="changed")))
    await world.drain(manager, embedder)
    index.stream_gate.set()
    index.catch_up_gate.set()
    await switched(manager)
    # The catch-up copies ids[3]; the feed's replay copies the six changed records again.
    assert index.replayed == ([ids[3], *sorted([ids[3], *added])] if shared else [ids[3]])
    assert await index.point_ids(index.built) == sorted(ids + added)
    await manager.close()
