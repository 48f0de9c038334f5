"""``WORKERS=2``: one listening socket, two real worker processes under uvicorn's supervisor, and
the index host beside them (``app.index_host``): the workers follow it, none owns the index.

Which worker answers is the kernel's choice per connection, so each test holds a keep-alive
connection to each worker (``tests.support.workers``). Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from app.serving import AUTO_MAX, usable_cores
from tests.support.process import WriteLoad, wait_for_health
from tests.support.process_tree import INDEX_HOST_NAME, alive as _alive, comm, index_hosts, until as _until
from tests.support.server import ServiceProcess, service_env
from tests.support.workers import two_workers


def _env(db: Path, **extra: str) -> dict[str, str]:
    return service_env(db, {"WORKERS": "2", **extra})


def _owner_pid(client: httpx.Client) -> int | None:
    """The index owner's pid, from /health on this connection."""
    return (client.get("/health").json()["components"]["vectorIndex"].get("index", {}).get("owner") or {}).get("pid")


def _children(parent: int) -> set[int]:
    """The HTTP worker processes of ``parent`` (the index host and multiprocessing's resource
    tracker excluded)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"spawn_main" in cmdline and comm(int(entry.name)) != INDEX_HOST_NAME \
                and _alive(int(entry.name)):
            found.add(int(entry.name))
    return found


def _sample(exposition: str, name: str) -> float:
    return float(next(line.split()[-1] for line in exposition.splitlines() if line.startswith(name + " ")))


def _metrics_dir(worker: int) -> Path:
    """The directory the supervisor gave ``worker`` for prometheus-client's multiprocess files."""
    environ = dict(item.split(b"=", 1) for item in Path(f"/proc/{worker}/environ").read_bytes().split(b"\0") if b"=" in item)
    return Path(environ[b"PROMETHEUS_MULTIPROC_DIR"].decode())


def _hybrid_hit(client: httpx.Client, query: str, episode_id: int) -> bool:
    body = client.post("/search", json={"query": query, "limit": 5}).json()
    hit = next((h for h in body["hits"] if h["id"] == episode_id), None)
    return not body["degraded"] and hit is not None and hit["vector"] is not None


def test_two_workers_see_each_others_writes_and_answer_hybrid_search_from_the_index_host(tmp_path):
    with ServiceProcess(_env(tmp_path / "memory.db")) as server:
        workers = _children(server.pid)
        assert len(workers) == 2
        (host,) = _until(lambda: index_hosts(server.pid), "the index host")
        first, second = two_workers(server.url)
        with closing(first), closing(second):
            # Neither worker owns the index: the host, a process of its own, does.
            _until(lambda: _owner_pid(first) == host and _owner_pid(second) == host, "both workers to see the host")
            assert host not in workers
            session = second.post("/sessions", json={"externalId": "shared"}).json()["id"]
            by_second = second.post("/episodes", json={
                "sessionId": session, "userMessage": "the lighthouse keeper polishes the lens",
                "aiResponse": "noted"}).json()
            by_first = first.post("/episodes", json={
                "sessionId": session, "userMessage": "a walrus naps on the harbour wall",
                "aiResponse": "noted"}).json()
            assert first.get(f"/episodes/{by_second['id']}").json()["userMessage"].startswith("the lighthouse")
            assert second.get(f"/episodes/{by_first['id']}").json()["userMessage"].startswith("a walrus")
            assert [e["id"] for e in second.get(f"/sessions/{session}/episodes").json()["items"]] == \
                [by_second["id"], by_first["id"]]
            # Each worker's vector leg is answered by the host's index over the socket.
            for client in (first, second):
                _until(lambda: _hybrid_hit(client, "lighthouse lens", by_second["id"]), "a hybrid hit")
                _until(lambda: _hybrid_hit(client, "walrus harbour", by_first["id"]), "the other write indexed")
            # Their /health reports the host's index (checked in the background: polled, bounded).
            _until(lambda: (c := second.get("/health").json()["components"]["vectorIndex"])["status"] == "ok"
                   and c["points"]["episodes"] == 2, "the worker's health to count both points")
            # /metrics says which worker answered; the data gauges are read from the shared store.
            first_metrics, second_metrics = first.get("/metrics").text, second.get("/metrics").text
            assert 'role="follower"} 1.0' in first_metrics and 'role="follower"} 1.0' in second_metrics
            assert 'memory_store_rows{table="episodes"} 2.0' in second_metrics
            # Counters add up over the processes whichever answers: one POST reached each worker,
            # and only the host embeds.
            posts = 'memory_http_requests_total{method="POST",route="/episodes",status="201"} 2.0'
            assert posts in first_metrics and posts in second_metrics
            assert _sample(second_metrics, "memory_embed_calls_total") >= 1
            assert _sample(second_metrics, "memory_embed_calls_total") == _sample(first_metrics,
                                                                                  "memory_embed_calls_total")
        socket_file = Path(f"{tmp_path / 'memory.db'}.sock")
        assert socket_file.stat().st_mode & 0o777 == 0o600
        metrics_dir = _metrics_dir(next(iter(_children(server.pid))))
        assert metrics_dir.stat().st_mode & 0o777 == 0o700 and any(metrics_dir.glob("counter_*.db"))
        assert _metrics_dir(host) == metrics_dir
        assert server.stop() == 0, server.stderr()
    assert not socket_file.exists()
    assert not metrics_dir.exists()


def test_killing_the_index_host_starts_another_and_loses_no_write(tmp_path):
    with ServiceProcess(_env(tmp_path / "memory.db")) as server:
        (host,) = _until(lambda: index_hosts(server.pid), "the index host")
        workers = _children(server.pid)
        first, second = two_workers(server.url)
        first.close()
        with closing(second):
            _until(lambda: _owner_pid(second) == host, "the host to answer")
            session = second.post("/sessions", json={"externalId": "failover"}).json()["id"]
            with WriteLoad(server.url, session, threads=4, tag="failover") as load:
                _until(lambda: load.acknowledged.total() >= 40, "writes before the kill")
                os.kill(host, signal.SIGKILL)
                _until(lambda: not _alive(host), "the host to die")
                # Meanwhile the workers' searches answer from keywords and say why.
                degraded = second.post("/search", json={"query": "failover"}).json()
                _until(lambda: load.acknowledged.total() >= 120, "writes after the kill")
            assert load.acknowledged.refused == []
            (new_host,) = _until(lambda: (found := index_hosts(server.pid)) and host not in found and found,
                                 "another index host")
            _until(lambda: _owner_pid(second) == new_host, "the new host to own the index")
            assert new_host not in workers and _children(server.pid) == workers  # no worker took the role over
            for episode_id in load.acknowledged.episodes:
                assert second.get(f"/episodes/{episode_id}").status_code == 200
            late = second.post("/episodes", json={"sessionId": session, "userMessage": "zebra crossing at dawn",
                                                  "aiResponse": "noted"}).json()
            _until(lambda: _hybrid_hit(second, "zebra dawn", late["id"]), "vector search to recover")
            wait_for_health(server.url, lambda b: b["components"]["embeddingBacklog"]["pending"] == 0)
        assert degraded["hits"] is not None  # answered (keyword leg) while no one owned the index
        assert server.stop() == 0, server.stderr()


def test_a_killed_worker_is_replaced_and_sigterm_drains_every_worker_and_the_host(tmp_path):
    with ServiceProcess(_env(tmp_path / "memory.db")) as server:
        (host,) = _until(lambda: index_hosts(server.pid), "the index host")
        first = _children(server.pid)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        replaced = _until(lambda: (now := _children(server.pid)) - first and len(now) == 2 and now,
                          "a replacement worker")
        assert victim not in replaced and index_hosts(server.pid) == {host}  # the host never noticed
        session = httpx.post(f"{server.url}/sessions", json={"externalId": "drain"}).json()["id"]
        with WriteLoad(server.url, session, threads=4, tag="drain") as load:
            _until(lambda: load.acknowledged.total() >= 40, "writes before SIGTERM")
            processes = _children(server.pid) | {host}
            code = server.stop()
        assert code == 0, server.stderr()
        assert not any(_alive(pid) for pid in processes)
        server.start()
        for episode_id in load.acknowledged.episodes:
            assert httpx.get(f"{server.url}/episodes/{episode_id}").status_code == 200
        assert load.acknowledged.refused == []


def test_kill_9_of_the_supervisor_leaves_no_worker_nor_host_behind(tmp_path):
    with ServiceProcess(_env(tmp_path / "memory.db")) as server:
        workers = _children(server.pid)
        assert len(workers) == 2
        hosts = _until(lambda: index_hosts(server.pid), "the index host")
        server.kill()
        _until(lambda: not any(_alive(pid) for pid in workers | hosts), "the workers and the host to die with "
               "their parent", 30)
        server.start()  # the port and the index are free again
        assert httpx.get(f"{server.url}/health").status_code == 200
        assert server.stop() == 0, server.stderr()


@pytest.mark.parametrize("variables", [{"STORE": "memory"}, {"SQLITE_PATH": ":memory:"}])
def test_several_workers_over_a_store_they_cannot_share_is_a_configuration_error(tmp_path, variables):
    from tests.support.server import run_service

    result = run_service(["serve"], _env(tmp_path / "memory.db", **variables))
    assert result.returncode == 2
    assert "WORKERS: must be 1 when" in result.stderr


def test_by_default_serve_runs_one_worker_per_usable_core_beside_the_index_host(tmp_path):
    env = _env(tmp_path / "memory.db")
    del env["WORKERS"]  # the default, as `make run` serves
    expected = max(1, min(usable_cores(), AUTO_MAX))
    with ServiceProcess(env) as server:
        hosts = _until(lambda: index_hosts(server.pid), "the index host")
        assert len(hosts) == 1
        workers = _children(server.pid)
        # One core: the serve process answers itself; more: that many workers under the supervisor.
        assert len(workers) == (expected if expected > 1 else 0)
        session = httpx.post(f"{server.url}/sessions", json={"externalId": "default"}).json()["id"]
        written = httpx.post(f"{server.url}/episodes", json={"sessionId": session, "userMessage": "the default",
                                                                "aiResponse": "noted"})
        assert written.status_code == 201
        assert httpx.get(f"{server.url}/episodes/{written.json()['id']}").status_code == 200
        assert server.stop() == 0, server.stderr()
