"""Faults below the API: the vector index unusable at start-up or failing at run time, and the
database refusing writes (disk full, read-only).

Start-up faults run the real ``memory-service serve``: a store that cannot be opened must exit with
one clear line, not a traceback; an index that cannot be opened must not stop start-up at all. Run-time faults use the app in-process with a hand-written breakable index (a real
in-memory index behind a switch) and the real SQLite store, whose writer connection is made to
fail the way SQLite does when the disk fills (``max_page_count``) or the file is read-only
(``query_only``: root ignores file modes, so chmod cannot make a file read-only here).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from dependency_injector import providers
from litestar.testing import TestClient

from adapters.memory.vector_index import InMemoryVectorIndex
from app.container import build_container
from app.main import create_app
from domain.errors import VectorIndexError
from domain.vectors import VectorFilter, VectorPoint
from tests.support.process import backlog_pending, fresh_health, integrity_problems, read_only, wait_for_index
from tests.contract.store_helpers import FAR_FUTURE
from tests.support.server import ServiceProcess, ServiceProcessError, service_env

pytestmark = pytest.mark.e2e


# -- start-up ----------------------------------------------------------------------------------
def _assert_one_line_start_up_failure(env) -> str:
    server = ServiceProcess(env, startup_timeout=30, cwd=Path(env["SQLITE_PATH"]).parents[1])
    with pytest.raises(ServiceProcessError):
        server.start(attempts=1)
    stderr = server.stderr()
    assert server.returncode == 1, stderr
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("start-up failed: "), stderr
    return lines[0]


def test_an_unwritable_qdrant_path_does_not_stop_start_up_and_health_names_it(tmp_path):
    # The vector index is derived data: the service starts, writes and keyword search work.
    (tmp_path / "a-file").write_text("not a directory")
    env = service_env(tmp_path / "memory.db", {"QDRANT_PATH": str(tmp_path / "a-file" / "shards")})
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url) as http:
        sid = http.post("/sessions", json={"externalId": "s"}).json()["id"]
        assert http.post("/episodes", json={"sessionId": sid, "userMessage": "kiwi", "aiResponse": "x"}).status_code == 201
        health = http.get("/health").json()
        index = health["components"]["vectorIndex"]
        assert health["status"] == "degraded" and index["status"] == "degraded"
        assert "Qdrant Edge directory" in index["index"]["collections"]["episodes"]["reason"]
        search = http.post("/search", json={"query": "kiwi"}).json()
        assert search["degraded"] is True and [h["id"] for h in search["hits"]] == [1]


@pytest.mark.sqlite_only  # two stores, two SQLite files, one shard directory
def test_two_servers_sharing_a_qdrant_path_both_start_and_keep_their_own_generations(tmp_path):
    # Physical collections carry the store's id, so a shared directory is no longer a lock conflict.
    shared = str(tmp_path / "shared.qdrant")
    first_env = service_env(tmp_path / "first.db", {"QDRANT_PATH": shared})
    second_env = service_env(tmp_path / "second.db", {"QDRANT_PATH": shared})
    with ServiceProcess(first_env, log_dir=tmp_path) as first, ServiceProcess(second_env, log_dir=tmp_path) as second:
        for server, n in ((first, 3), (second, 5)):
            with httpx.Client(base_url=server.url) as http:
                sid = http.post("/sessions", json={"externalId": "s"}).json()["id"]
                for i in range(n):
                    http.post("/episodes", json={"sessionId": sid, "userMessage": f"kiwi {i}", "aiResponse": "x"})
        for server, n in ((first, 3), (second, 5)):
            body = wait_for_index(server.url)
            assert body["components"]["vectorIndex"]["index"]["collections"]["episodes"]["points"] == n


@pytest.mark.sqlite_only  # a SQLite file that cannot be opened
def test_an_unopenable_database_stops_start_up_with_one_clear_line(tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    _assert_one_line_start_up_failure(service_env(tmp_path / "a-file" / "memory.db"))


# -- run time: the vector index ----------------------------------------------------------------
class BreakableVectorIndex(InMemoryVectorIndex):
    """The in-memory index, except that every call fails while ``broken`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def _fail(self) -> None:
        if self.broken:
            raise VectorIndexError("the vector index is unreachable (test switch)")

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        self._fail()
        await super().upsert(collection, points)

    async def search(self, collection, vector, limit, filter=None, score_threshold=None):
        self._fail()
        return await super().search(collection, vector, limit, filter, score_threshold)

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        self._fail()
        await super().delete(collection, ids)

    async def delete_by_filter(self, collection: str, filter: VectorFilter) -> None:
        self._fail()
        await super().delete_by_filter(collection, filter)

    async def health(self) -> str | None:
        return "unreachable (test switch)" if self.broken else await super().health()


def _wait(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        time.sleep(0.05)


def test_index_errors_at_run_time_keep_writes_working_and_queue_the_deletes(make_settings):
    settings = make_settings()
    container = build_container(settings)
    index = BreakableVectorIndex()
    container.vector_index.override(providers.Object(index))
    with TestClient(create_app(settings, container)) as client:
        sid = client.post("/sessions", json={"externalId": "index-faults"}).json()["id"]
        kept = client.post("/episodes", json={"sessionId": sid, "userMessage": "kept mango", "aiResponse": "x"})
        doomed = client.post("/episodes", json={"sessionId": sid, "userMessage": "doomed mango", "aiResponse": "x"})
        fresh_health(client, lambda body: backlog_pending(body) == 0)

        index.broken = True
        written = client.post("/episodes", json={"sessionId": sid, "userMessage": "late mango", "aiResponse": "x"})
        assert written.status_code == 201
        assert client.delete(f"/episodes/{doomed.json()['id']}").status_code in (200, 204)
        health = fresh_health(client, lambda body: body["components"]["vectorIndex"]["status"] == "down")
        assert health["status"] == "degraded"
        search = client.post("/search", json={"query": "mango"}).json()
        assert search["degraded"] is True
        assert {h["id"] for h in search["hits"]} == {kept.json()["id"], written.json()["id"]}
        assert len(client.get("/episodes/search", params={"q": "mango"}).json()["results"]) == 2
        # Through the store's own port, so the check holds on either store.
        queued = [(j.op, j.ref_id) for j in asyncio.run(container.store().outbox.due(100, FAR_FUTURE))]
        assert ("delete", doomed.json()["id"]) in queued
        assert ("upsert", written.json()["id"]) in queued

        index.broken = False
        fresh_health(client, lambda body: backlog_pending(body) == 0, timeout=120)
        manager = container.index_manager()
        ids = {h.id for h in asyncio.run(manager.search("episodes", [1.0] * 16, 10))}
        assert ids == {kept.json()["id"], written.json()["id"]}


# -- run time: the database refuses writes -----------------------------------------------------
def _counts(path: str) -> dict[str, int]:
    with read_only(path) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("sessions", "episodes", "embedding_outbox", "episodes_fts_docsize")}


@pytest.mark.sqlite_only  # faults set by PRAGMAs on the SQLite file
@pytest.mark.parametrize("fault,pragma,message", [
    ("disk full", "PRAGMA max_page_count = {pages}", "disk is full"),
    ("read-only", "PRAGMA query_only = ON", "read-only"),
])
def test_a_database_that_refuses_writes_answers_503_and_writes_nothing(make_settings, fault, pragma, message):
    settings = make_settings()
    with TestClient(create_app(settings)) as client:
        sid = client.post("/sessions", json={"externalId": "storage"}).json()["id"]
        client.post("/episodes", json={"sessionId": sid, "userMessage": "before", "aiResponse": "x"})
        database = client.app.state.container.store().database
        _wait(lambda: _counts(settings.sqlite_path)["embedding_outbox"] == 0, "the first embedding")
        before = _counts(settings.sqlite_path)
        pages = database.write_sync(lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
        # Both pragmas belong to the writer connection only, so reopening the store undoes them.
        database.write_sync(lambda conn: conn.execute(pragma.format(pages=pages)).fetchall())
        big = "words " * 15_000  # far more than the free space left in the last pages
        single = client.post("/episodes", json={"sessionId": sid, "userMessage": big, "aiResponse": big})
        batch = client.post("/episodes/batch", json={"episodes": [
            {"sessionId": sid, "userMessage": f"small {n}", "aiResponse": big} for n in range(10)]})
        session = client.post("/sessions", json={"externalId": "x" * 400, "metadata": {"pad": big}})
        for response in (single, batch, session):
            assert response.status_code == 503, response.text
            body = response.json()
            assert body["code"] == "unavailable" and message in body["message"]
            assert "Traceback" not in response.text and "sqlite" not in response.text.lower()
        assert client.get("/episodes/search", params={"q": "before"}).status_code == 200
        assert client.get("/health").status_code == 200  # reads still work
    assert _counts(settings.sqlite_path) == before, fault
    assert integrity_problems(settings.sqlite_path) == []
    with TestClient(create_app(settings)) as client:
        after = client.post("/episodes", json={"sessionId": sid, "userMessage": "after", "aiResponse": "x"})
        assert after.status_code == 201
