"""Two index roles over one store, in one process (the owner lock is an ``flock`` per open file,
so they contend as two processes would): one owns, the other follows over the real socket, and
when the owner stops the follower takes over. The multi-process version is tests/e2e/test_workers.py."""

from __future__ import annotations

import asyncio

import pytest

from adapters.embedders.hashing import HashEmbedder
from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.sqlite.catalog import SqliteIndexCatalog
from adapters.sqlite.store import SqliteStore
from app.index_role import IndexRole, role_paths
from domain.errors import VectorIndexError
from domain.index_manager import IndexManager
from domain.vectors import ModelRef

DIM = 16
WAIT = 30.0


def _role(store: SqliteStore, base: str, follow_seconds: float = 30.0) -> IndexRole:
    embedder = HashEmbedder(DIM)
    opened: list[IndexManager] = []

    def open_manager() -> IndexManager:
        opened.append(IndexManager(InMemoryVectorIndex(), SqliteIndexCatalog(store.database), store, embedder, "hash"))
        return opened[-1]

    async def close_owned() -> None:
        for manager in opened:
            await manager.close()
        opened.clear()

    lock, sock = role_paths(base)
    return IndexRole(lock_path=lock, socket_path=sock, model=ModelRef("hash", embedder.model, DIM),
                     open_manager=open_manager, close_owned=close_owned, follow_seconds=follow_seconds)


async def _until(predicate, what: str):
    async with asyncio.timeout(WAIT):
        while not await predicate():
            await asyncio.sleep(0.05)


@pytest.fixture
async def store(tmp_path):
    opened = SqliteStore.open(str(tmp_path / "m.db"))
    yield opened
    await opened.close()


async def test_the_follower_reaches_the_owners_index_and_takes_over_when_it_stops(store, tmp_path):
    base = str(tmp_path / "m.db")
    first, second = _role(store, base), _role(store, base)
    await first.start()
    await second.start()
    try:
        assert first.owner and not second.owner
        assert await second.view.count("episodes") == 0  # answered by the owner over the socket
        assert await second.view.search("episodes", [1.0] * DIM, 5) == []
        status = second.view.status()
        assert status["owner"] == {"pid": first.view.status()["owner"]["pid"], "thisWorker": False}
        assert await second.view.health() is None

        await first.stop()
        # Until the follower has taken over, its vector calls fail as an index outage would.
        async def taken_over() -> bool:
            return second.owner
        await _until(taken_over, "the follower to own the index")
        assert second.view.status()["owner"]["thisWorker"] is True

        # The new owner's manager opens its collections in the background (as at any start):
        # until then a count fails as an outage; then it answers from the index itself.
        async def counted() -> bool:
            try:
                return await second.view.count("episodes") == 0
            except VectorIndexError:
                return False
        await _until(counted, "the new owner to answer for its collections")
    finally:
        await second.stop()
        await first.stop()


async def test_without_an_owner_vector_calls_fail_as_an_index_outage_and_health_says_why(store, tmp_path):
    role = _role(store, str(tmp_path / "m.db"), follow_seconds=0.2)
    holder = _role(store, str(tmp_path / "m.db"))
    assert holder._lock.try_acquire()  # holds the lock but never serves: an owner still starting
    try:
        await role.start()
        assert not role.owner
        with pytest.raises(VectorIndexError, match="no index owner answers"):
            await role.view.search("episodes", [1.0] * DIM, 5)
        reason = await role.view.health()
        assert reason is not None and "starting or gone" in reason and "keywords" in reason
        assert role.view.status()["status"] == "unavailable"
        assert role.view.problem() is not None
    finally:
        await role.stop()
        holder._lock.release()


def _follower(store: SqliteStore, base: str) -> IndexRole:
    role = _role(store, base)
    role.may_own = False  # an HTTP process beside the index host
    return role


async def test_a_follower_only_never_takes_the_role_and_reaches_the_owner_that_starts_next(store, tmp_path):
    base = str(tmp_path / "m.db")
    host, follower = _role(store, base), _follower(store, base)
    host._dead_lettered = lambda: 3
    await host.own()
    await follower.start()
    try:
        assert host.owner and not follower.owner
        assert await follower.view.count("episodes") == 0
        assert await follower.view.health() is None
        assert follower.view.dead_lettered(0) == 3  # the owner's count, not this process's
        await host.stop()
        # The lock is free, yet a follower only waits for the next host: its calls fail as an
        # index outage meanwhile, and its health names the host being restarted.
        with pytest.raises(VectorIndexError):
            await follower.view.search("episodes", [1.0] * DIM, 5)
        reason = await follower.view.health()
        assert reason is not None and "index host" in reason and "restarted" in reason and "keywords" in reason
        assert not follower.owner
        restarted = _role(store, base)
        await restarted.own()
        try:
            assert restarted.owner and not follower.owner

            async def reached() -> bool:
                try:
                    return await follower.view.count("episodes") == 0
                except VectorIndexError:
                    return False
            await _until(reached, "the follower to reach the restarted host")
            assert follower.view.status()["owner"]["thisWorker"] is False
        finally:
            await restarted.stop()
    finally:
        await follower.stop()
        await host.stop()


async def test_an_owner_whose_lock_is_taken_keeps_trying_and_owns_once_it_is_free(store, tmp_path):
    base = str(tmp_path / "m.db")
    holder = _role(store, base)
    assert holder._lock.try_acquire()  # e.g. a maintenance command working offline
    host = _role(store, base)
    try:
        await host.own()
        assert not host.owner
        holder._lock.release()

        async def owned() -> bool:
            return host.owner
        await _until(owned, "the host to take the freed lock")
    finally:
        await host.stop()
