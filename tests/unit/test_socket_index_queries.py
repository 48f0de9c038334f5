"""A request's calls to the index owner (``search``, ``retrieve_vectors``, ``count``, a query's
``embed``) are bounded by the query timeout, whatever the longer call timeout is; after one went
unanswered the next fail at once without being sent, until the owner answers again. Real unix
sockets: an owner that accepts and never answers, and a real ``IndexServer`` whose index is held
back by a gate (stuck in a search, then free again). Each ``asyncio.wait_for(…, 10)`` only ends a
failing case; nothing asserts a duration."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from adapters.embedders.hashing import HashEmbedder
from adapters.ipc import wire
from adapters.ipc.client import SocketVectorIndex
from adapters.ipc.embedder import SocketEmbedder
from adapters.ipc.server import IndexServer
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.rankers.builtin import RrfRanker
from app.index_role import IndexRole, role_paths
from domain import writes
from domain.errors import EmbeddingError, VectorIndexError
from domain.models import NewEpisode
from domain.ranking import RankerConfig
from domain.retrieval import SearchQuery, SearchService
from domain.vectors import ModelRef, VectorPoint

DIM = 4
GUARD = 10  # seconds: ends a failing case, asserts nothing
QUERIES = {
    "search": lambda client: client.search("episodes", [1.0, 0.0, 0.0, 0.0], 5),
    "retrieve_vectors": lambda client: client.retrieve_vectors("episodes", [1]),
    "count": lambda client: client.count("episodes"),
}


async def _quiet_owner(path: Path, *, greets: bool = True) -> tuple[asyncio.Server, list[str]]:
    """An owner that accepts and never answers (but ``hello``, when ``greets``); the operations it
    received, in order."""
    received: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                request, _ = wire.decode_request(await wire.read_frame(reader))
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            received.append(request.op)
            if request.op == "hello" and greets:
                writer.write(wire.answer(request.id, None, None, {"pid": 1, "persistent": False}))

    return await asyncio.start_unix_server(serve, wire.bindable(path)), received


class _GatedIndex(InMemoryVectorIndex):
    """An owner's index whose searches and upserts wait for ``gate`` (a stuck engine, until freed)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def search(self, *args, **kwargs):
        await self.gate.wait()
        return await super().search(*args, **kwargs)

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        await self.gate.wait()
        await super().upsert(collection, points)


async def _stop(server: asyncio.Server | IndexServer, client: SocketVectorIndex) -> None:
    await client.close()
    if isinstance(server, IndexServer):
        await server.close()
    else:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("op", sorted(QUERIES))
async def test_a_query_to_an_owner_that_never_answers_fails_within_the_query_timeout(tmp_path: Path, op: str) -> None:
    server, received = await _quiet_owner(tmp_path / "owner.sock")
    client = SocketVectorIndex(tmp_path / "owner.sock", query_timeout=0.2)  # the call timeout stays 30 s
    try:
        with pytest.raises(VectorIndexError, match=rf"did not answer {op} within 0\.2s"):
            await asyncio.wait_for(QUERIES[op](client), GUARD)
    finally:
        await _stop(server, client)

    assert received == ["hello", op]


async def test_a_query_that_must_reconnect_to_an_owner_that_never_says_hello_is_bounded_too(tmp_path: Path) -> None:
    server, received = await _quiet_owner(tmp_path / "owner.sock", greets=False)
    client = SocketVectorIndex(tmp_path / "owner.sock", query_timeout=0.2)
    try:
        with pytest.raises(VectorIndexError, match=r"did not answer search within 0\.2s"):
            await asyncio.wait_for(QUERIES["search"](client), GUARD)
    finally:
        await _stop(server, client)

    assert received == ["hello"]  # nothing is sent to an owner that has not said who it is


async def test_after_an_unanswered_query_the_next_ones_fail_at_once_and_nothing_more_is_sent(tmp_path: Path) -> None:
    server, received = await _quiet_owner(tmp_path / "owner.sock")
    client = SocketVectorIndex(tmp_path / "owner.sock", query_timeout=0.2)
    embedder = SocketEmbedder(client, "hash", DIM, timeout=0.2)
    try:
        with pytest.raises(VectorIndexError, match="did not answer search"):
            await asyncio.wait_for(QUERIES["search"](client), GUARD)
        tasks = len(asyncio.all_tasks())
        for _ in range(50):
            for op in sorted(QUERIES):
                with pytest.raises(VectorIndexError, match=r"has not answered for .*search unanswered within 0\.2s"):
                    await asyncio.wait_for(QUERIES[op](client), GUARD)
            with pytest.raises(EmbeddingError, match="has not answered"):
                await asyncio.wait_for(embedder.embed(["query"]), GUARD)
            client.notify()  # a write's wake-up call is not queued up for a hung owner either
        await asyncio.sleep(0)  # a due notice would go out now
        assert len(asyncio.all_tasks()) == tasks  # nothing left waiting behind the failed calls
    finally:
        await _stop(server, client)

    assert received == ["hello", "search"]  # 200 queries and 50 notices never reached the owner


async def test_once_the_owner_answers_again_queries_reach_it_and_are_answered(tmp_path: Path) -> None:
    path = tmp_path / "owner.sock"
    index = _GatedIndex()
    index.gate.set()
    await index.ensure_collection("episodes", DIM)
    await index.upsert("episodes", [VectorPoint(7, (1.0, 0.0, 0.0, 0.0), {})])
    index.gate.clear()  # stuck from here on
    server = IndexServer(index, path)
    await server.start()
    client = SocketVectorIndex(path, query_timeout=0.2)
    try:
        with pytest.raises(VectorIndexError, match="did not answer search"):
            await asyncio.wait_for(QUERIES["search"](client), GUARD)
        with pytest.raises(VectorIndexError, match="has not answered"):
            await asyncio.wait_for(QUERIES["search"](client), GUARD)
        index.gate.set()  # the owner answers the search it held (late); the client hears it
        async with asyncio.timeout(GUARD):
            while True:
                try:
                    hits = await QUERIES["search"](client)
                    break
                except VectorIndexError:
                    await asyncio.sleep(0.02)
    finally:
        await _stop(server, client)

    assert [hit.id for hit in hits] == [7]


async def test_writes_keep_the_longer_call_timeout_while_queries_give_up(tmp_path: Path) -> None:
    path = tmp_path / "owner.sock"
    index = _GatedIndex()
    server = IndexServer(index, path)
    await server.start()
    client = SocketVectorIndex(path, query_timeout=0.2)  # writes: the 30 s call timeout
    try:
        await client.ensure_collection("episodes", DIM)
        write = asyncio.create_task(client.upsert("episodes", [VectorPoint(3, (0.0, 1.0, 0.0, 0.0), {})]))
        with pytest.raises(VectorIndexError, match="did not answer search"):
            await asyncio.wait_for(QUERIES["search"](client), GUARD)
        assert not write.done()  # still waiting, past the query timeout
        index.gate.set()
        await asyncio.wait_for(write, GUARD)
        assert await client.count("episodes") == 1
    finally:
        await _stop(server, client)


class _Rankers:
    def get(self, name: str) -> RrfRanker:
        return RrfRanker(RankerConfig())


async def test_a_followers_search_answers_from_keywords_when_the_owner_hangs_and_waits_for_it_once(
        tmp_path: Path) -> None:
    store = MemoryStore()
    session = await store.uow.run(lambda tx: writes.create_session(tx, "s", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "we adopted a kitten", "ok")]))
    server, received = await _quiet_owner(tmp_path / "owner.sock")
    client = SocketVectorIndex(tmp_path / "owner.sock", query_timeout=0.2)
    search = SearchService(store, client, HashEmbedder(DIM), _Rankers(), "rrf")
    try:  # three sources: one vector search per source; the first one alone waits
        found = await asyncio.wait_for(search.search(SearchQuery("kitten", sources=("episodes", "entities",
                                                                                     "summaries"))), GUARD)
        again = await asyncio.wait_for(search.search(SearchQuery("kitten")), GUARD)
    finally:
        await _stop(server, client)

    for result in (found, again):
        assert result.degraded and all("vector index unavailable" in w for w in result.warnings), result.warnings
        assert [hit.item.user_message for hit in result.hits] == ["we adopted a kitten"]
        assert result.hits[0].keyword is not None and result.hits[0].vector is None
    assert received == ["hello", "search"]


async def test_a_follower_only_roles_searches_are_bounded_by_its_query_timeout(tmp_path: Path) -> None:
    lock, path = role_paths(str(tmp_path / "m.db"))
    server, _ = await _quiet_owner(Path(path))

    async def never() -> None:
        raise AssertionError("a follower only never opens the index")

    role = IndexRole(lock_path=lock, socket_path=path, model=ModelRef("hash", "hash", DIM), open_manager=never,
                     close_owned=never, may_own=False, follow_seconds=0.0, query_timeout=0.2)
    try:
        with pytest.raises(VectorIndexError, match=r"did not answer search within 0\.2s"):
            await asyncio.wait_for(role.view.search("episodes", [1.0, 0.0, 0.0, 0.0], 5), GUARD)
    finally:
        await role.stop()
        server.close()
        await server.wait_closed()
