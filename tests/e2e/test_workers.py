"""``WORKERS`` > 1 where the engines are shared: a Qdrant server as the index (here one that does
not answer: derived data never stops the service) over one SQLite file. uvicorn's own supervisor
runs the workers; they share the file through SQLite's locking, one of them holds the store's
maintenance lock, and ``kill -9`` of ``serve`` leaves no worker behind."""

from __future__ import annotations

import httpx
import pytest

from tests.support.process_tree import alive, children, comm, until
from tests.support.server import ServiceProcess, free_port, service_env

# SQLite only under TEST_STORE=postgres: several workers sharing one SQLite file through its locking.
pytestmark = [pytest.mark.e2e, pytest.mark.sqlite_only]


def _env(tmp_path):
    # Nothing listens at QDRANT_URL: the vector index is down, every write still lands in SQLite.
    return service_env(tmp_path / "memory.db", {"WORKERS": "2", "VECTOR_INDEX": "server",
                                                "QDRANT_URL": f"http://127.0.0.1:{free_port()}"})


def _workers(pid: int) -> set[int]:
    # uvicorn's supervisor spawns its workers with multiprocessing, beside its resource tracker.
    return {child for child in children(pid) if "resource_tracker" not in (_cmdline(child) or "")}


def _two_workers(pid: int) -> set[int] | None:
    found = _workers(pid)
    return found if len(found) == 2 else None


def _cmdline(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as found:
            return found.read().replace(b"\0", b" ").decode()
    except OSError:
        return None


def test_two_workers_share_one_sqlite_file_and_one_holds_the_maintenance_lock(tmp_path):
    with ServiceProcess(_env(tmp_path), log_dir=tmp_path) as server:
        workers = until(lambda: _two_workers(server.pid), "two workers")
        assert server.pid not in workers and all(comm(pid) for pid in workers)
        session = httpx.post(f"{server.url}/sessions", json={"externalId": "two"}).json()["id"]
        for n in range(30):  # a fresh connection each: the kernel hands them to either worker
            with httpx.Client(base_url=server.url) as fresh:
                assert fresh.post("/episodes", json={"sessionId": session, "userMessage": f"note {n}",
                                                     "aiResponse": "ok"}).status_code == 201
        for _ in range(6):  # every worker sees every write
            with httpx.Client(base_url=server.url) as fresh:
                assert fresh.get(f"/sessions/{session}/episodes", params={"limit": 50}).json()["total"] == 30
                hits = fresh.get("/episodes/search", params={"q": "note", "limit": 50}).json()
                assert len(hits["results"]) == 30
        holder = until(lambda: int(text) if (text := (tmp_path / "memory.db.lock").read_text().strip()) else None,
                       "the maintenance lock's holder")
        assert holder in workers
        assert server.stop() == 0
        assert not any(alive(pid) for pid in workers)


def test_kill_9_of_serve_leaves_no_worker_serving_the_port(tmp_path):
    server = ServiceProcess(_env(tmp_path), log_dir=tmp_path)
    server.start()
    try:
        workers = until(lambda: _two_workers(server.pid), "two workers")
        server.kill()
        until(lambda: not any(alive(pid) for pid in workers), "the workers to die with serve")
    finally:
        server.close()
