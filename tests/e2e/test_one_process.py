"""``serve`` is one process on the embedded engines: it refuses ``WORKERS`` > 1 there with one
line naming the engines that allow several, and nothing but the store and its lock file lies
beside the database."""

from __future__ import annotations

import httpx
import pytest

from tests.support.process import wait_for_backlog
from tests.support.process_tree import children
from tests.support.server import ServiceProcess, run_service, service_env

# SQLite only under TEST_STORE=postgres: the embedded default: one process and the files beside the SQLite file.
pytestmark = [pytest.mark.e2e, pytest.mark.sqlite_only]


@pytest.mark.parametrize(("variables", "named"), [
    ({}, "VECTOR_INDEX=edge"),  # the embedded default: Qdrant Edge has one opener
    ({"VECTOR_INDEX": "memory"}, "VECTOR_INDEX=memory"),  # an in-memory index is private to its process
])
def test_workers_2_on_an_engine_processes_cannot_share_exits_2_with_one_line_naming_workers(
        tmp_path, variables, named):
    env = service_env(tmp_path / "memory.db", {**variables, "WORKERS": "2"})
    refused = run_service(["serve"], env, timeout=60)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith("configuration error: WORKERS: must be 1 with") and named in lines[0]
    assert "VECTOR_INDEX=server" in lines[0] and "STORE=postgres" in lines[0]
    assert not (tmp_path / "memory.db").exists()  # refused before anything was opened


def test_serve_on_the_default_engines_is_one_process_and_leaves_no_socket_or_election_files(tmp_path):
    env = service_env(tmp_path / "memory.db")
    del env["WORKERS"]  # the default
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url) as http:
        session = http.post("/sessions", json={"externalId": "one"}).json()["id"]
        for n in range(5):
            assert http.post("/episodes", json={"sessionId": session, "userMessage": f"note {n}",
                                                "aiResponse": "ok"}).status_code == 201
        wait_for_backlog(server.url, pending=0)
        assert http.post("/search", json={"query": "note", "limit": 5}).json()["hits"]
        # A small store is built in place: no build child either, so no process but this one.
        assert children(server.pid) == set()
        index = http.get("/health").json()["components"]["vectorIndex"]["index"]
        assert index["maintaining"] is True
        beside = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("memory.db"))
        assert beside == ["memory.db", "memory.db-shm", "memory.db-wal", "memory.db.lock", "memory.db.qdrant"]
        assert server.stop() == 0
