"""``SocketEmbedder`` and the owner's ``embed`` / ``embedder_probe`` operations, over a real unix
socket: the owner's model answers; its failures cross as ``EmbeddingError``; an owner that is
gone or does not answer is an ``EmbeddingError`` within the timeout, never a hang."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from adapters.embedders.hashing import HashEmbedder, hash_vector
from adapters.embedders.local import LocalEmbedder
from adapters.memory.store import MemoryStore
from adapters.ipc import wire
from adapters.ipc.client import SocketVectorIndex
from adapters.ipc.embedder import SocketEmbedder, owner_operations
from adapters.ipc.server import IndexServer
from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.rankers.builtin import RrfRanker
from domain import writes
from domain.errors import EmbeddingError
from domain.models import NewEpisode
from domain.ranking import RankerConfig
from domain.retrieval import SearchQuery, SearchService
from ports.embedder import EmbedderStatus
from tests.support.loading_embedder import GatedLocalEmbedder
from tests.support.served_embedder import served_embedder


async def test_queries_are_embedded_by_the_owners_model(tmp_path: Path) -> None:
    async with served_embedder(HashEmbedder(16), tmp_path / "owner.sock") as embedder:
        vectors = await embedder.embed(["alpha", "beta"])

        assert vectors == [pytest.approx(hash_vector(text, 16)) for text in ["alpha", "beta"]]
        assert (await embedder.probe()).reachable


async def test_the_owners_model_failure_crosses_the_socket_as_an_embedding_error(tmp_path: Path) -> None:
    wrong = LocalEmbedder("all-MiniLM-L6-v2", 768)  # the host's model makes 384-d vectors
    async with served_embedder(wrong, tmp_path / "owner.sock") as embedder:
        with pytest.raises(EmbeddingError, match="384-d vectors but EMBEDDING_DIM is 768"):
            await embedder.embed(["x"])
        status = await embedder.probe()

    assert not status.reachable and "EMBEDDING_DIM is 768" in (status.error or "")


async def test_while_the_owners_model_loads_the_probe_says_starting(tmp_path: Path) -> None:
    loading = GatedLocalEmbedder()
    loading.start()
    try:
        async with served_embedder(loading, tmp_path / "owner.sock") as embedder:
            status = await embedder.probe()
            assert (status.starting, status.reachable) == (True, False)
            loading.gate.set()
            await loading.embed(["warm up"])  # a document call waits for the load; a query does not
            assert len((await embedder.embed(["hello"]))[0]) == 384
            assert (await embedder.probe()).reachable
    finally:
        loading.gate.set()


async def test_no_owner_is_an_embedding_error_and_a_starting_probe_until_it_first_answers(tmp_path: Path) -> None:
    client = SocketVectorIndex(tmp_path / "nobody.sock")
    fresh = SocketEmbedder(client, "all-MiniLM-L6-v2", 384)
    late = SocketEmbedder(client, "all-MiniLM-L6-v2", 384, starting_seconds=0)
    try:
        with pytest.raises(EmbeddingError, match="no index owner answers"):
            await fresh.embed(["x"])
        starting, down = await fresh.probe(), await late.probe()
    finally:
        await client.close()

    assert (starting.starting, starting.reachable) == (True, False)
    assert (down.starting, down.reachable) == (False, False)
    assert "index host does not answer" in (down.error or "") and "\n" not in (down.error or "")


async def test_an_owner_that_does_not_answer_is_an_embedding_error_within_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "silent.sock"
    received: list[bytes] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await wire.read_frame(reader))  # reads the hello, never answers
        await reader.read()

    server = await asyncio.start_unix_server(silent, wire.bindable(path))
    client = SocketVectorIndex(path, call_timeout=0.2)
    embedder = SocketEmbedder(client, "all-MiniLM-L6-v2", 384, timeout=0.2)
    try:
        with pytest.raises(EmbeddingError, match="did not answer"):
            await asyncio.wait_for(embedder.embed(["x"]), 10)  # the outer bound only guards the test
        status = await asyncio.wait_for(embedder.probe(), 10)
    finally:
        await client.close()
        server.close()
        await server.wait_closed()

    assert received and not status.reachable


async def test_a_restarted_owner_answers_the_next_query(tmp_path: Path) -> None:
    path = tmp_path / "owner.sock"
    async with served_embedder(HashEmbedder(16), path) as embedder:
        await embedder.embed(["before"])
    # The first owner is gone (its socket closed); a new one serves the same path.
    client = SocketVectorIndex(path)
    embedder = SocketEmbedder(client, "hash", 16)
    with pytest.raises(EmbeddingError):
        await embedder.embed(["during"])
    server = IndexServer(InMemoryVectorIndex(), path, extras=owner_operations(HashEmbedder(16)))
    await server.start()
    try:
        assert len(await embedder.embed(["after"])) == 1
    finally:
        await client.close()
        await server.close()


async def test_a_reconnect_to_an_owner_that_never_answers_hello_is_bounded_by_the_embedders_timeout(
        tmp_path: Path) -> None:
    path = tmp_path / "owner.sock"
    client = SocketVectorIndex(path)  # the call timeout stays at its 30 s default
    embedder = SocketEmbedder(client, "hash", 16, timeout=0.2)
    server = IndexServer(InMemoryVectorIndex(), path, extras=owner_operations(HashEmbedder(16)))
    await server.start()
    assert len(await embedder.embed(["before"])) == 1
    await server.close()  # the owner goes; a hung successor takes the path over
    connections: list[list[str]] = []

    async def hung(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames: list[str] = []
        connections.append(frames)
        while True:
            try:
                frames.append(wire.decode_request(await wire.read_frame(reader))[0].op)  # never answered
            except asyncio.IncompleteReadError:
                return

    successor = await asyncio.start_unix_server(hung, wire.bindable(path))
    try:
        for _ in range(2):
            with pytest.raises(EmbeddingError, match=r"did not answer embed within 0\.2s"):
                await asyncio.wait_for(embedder.embed(["during"]), 10)  # the outer bound only guards the test
            assert (await asyncio.wait_for(embedder.probe(), 10)).reachable is False
    finally:
        await client.close()
        successor.close()
        await successor.wait_closed()

    # A connection whose hello went unanswered carries no call: each attempt says hello anew.
    assert connections and all(frames == ["hello"] for frames in connections)


async def test_while_the_owners_model_loads_a_query_fails_at_once_instead_of_waiting_for_it(tmp_path: Path) -> None:
    loading = GatedLocalEmbedder()
    loading.start()
    try:
        async with served_embedder(loading, tmp_path / "owner.sock") as embedder:  # the 30 s default timeout
            with pytest.raises(EmbeddingError, match="is loading"):
                await asyncio.wait_for(embedder.embed(["hello"]), 10)  # the outer bound only guards the test
            assert loading.starting  # the answer came while the load was still held back
            loading.gate.set()
            await loading.embed(["warm up"])  # a document call waits for the load
            assert len((await embedder.embed(["hello"]))[0]) == 384
    finally:
        loading.gate.set()


class _Rankers:
    def __init__(self) -> None:
        self._rrf = RrfRanker(RankerConfig())

    def get(self, name: str) -> RrfRanker:
        return self._rrf


async def test_a_followers_search_answers_from_keywords_while_the_owners_model_loads(tmp_path: Path) -> None:
    store = MemoryStore()
    session = await store.uow.run(lambda tx: writes.create_session(tx, "s", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "we adopted a kitten", "ok")]))
    loading = GatedLocalEmbedder()
    loading.start()
    try:
        async with served_embedder(loading, tmp_path / "owner.sock") as embedder:
            search = SearchService(store, InMemoryVectorIndex(), embedder, _Rankers(), "rrf")
            found = await asyncio.wait_for(search.search(SearchQuery("kitten")), 10)  # guards the test only
    finally:
        loading.gate.set()

    assert found.degraded and "keyword results only" in found.warnings[0] and "is loading" in found.warnings[0]
    assert [hit.item.user_message for hit in found.hits] == ["we adopted a kitten"]
    assert found.hits[0].keyword is not None and found.hits[0].vector is None


class _FailingModel:
    """An owner's embedder that fails every call with ``reason`` (which a test may change)."""

    model, dimension, max_batch = "broken", 16, 16

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbeddingError(self.reason)

    async def probe(self) -> EmbedderStatus:
        return EmbedderStatus(reachable=False, model=self.model, dimension=self.dimension, error=self.reason)


async def test_a_model_that_failed_to_load_answers_each_query_quietly_and_the_host_logs_it_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broken = LocalEmbedder(str(tmp_path / "no-such-model"), 384)
    with pytest.raises(EmbeddingError, match="cannot load"):
        await broken.embed(["x"])  # the load has failed (and logged so, once)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="nexusai"):
        async with served_embedder(broken, tmp_path / "owner.sock") as embedder:
            for _ in range(3):
                with pytest.raises(EmbeddingError, match="cannot load local model"):
                    await embedder.embed(["a follower's search"])

    assert not [r for r in caplog.records if r.exc_info], "no traceback per follower search"
    assert len([r for r in caplog.records if "cannot load local model" in r.getMessage()]) == 1


async def test_the_hosts_log_of_failing_queries_speaks_again_only_when_the_failure_changes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = _FailingModel("model is out to lunch")
    with caplog.at_level(logging.INFO, logger="nexusai"):
        async with served_embedder(model, tmp_path / "owner.sock") as embedder:
            for reason in ["model is out to lunch"] * 2 + ["model fell over"] * 3 + ["model is out to lunch"]:
                model.reason = reason
                with pytest.raises(EmbeddingError, match=reason):
                    await embedder.embed(["q"])

    # Six failed queries, three lines: the first failure, its change, and the change back.
    assert not [r for r in caplog.records if r.exc_info]
    assert [r.getMessage().rsplit(": ", 1)[-1] for r in caplog.records] == [
        "model is out to lunch", "model fell over", "model is out to lunch"]
    assert all("followers' queries fail" in r.getMessage() for r in caplog.records)
