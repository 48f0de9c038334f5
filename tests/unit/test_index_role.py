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
