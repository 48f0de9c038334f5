"""``memory-service serve`` (default ``WORKERS=1``) runs the vector index in a process of its own,
the index host, which serves no HTTP: it is restarted when it dies, dies with the service, and
drains on SIGTERM. Real processes, real SQLite file, real Qdrant Edge; every wait is bounded."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx

from adapters.ipc.election import OwnerLock
from tests.support.process import WriteLoad, index_settled, wait_for_health
from tests.support.process_tree import alive, index_hosts, tree, until
from tests.support.server import ServiceProcess, service_env


def _owner(client: httpx.Client) -> dict:
    return client.get("/health").json()["components"]["vectorIndex"].get("index", {}).get("owner") or {}


def _hybrid_hit(client: httpx.Client, query: str, episode_id: int) -> bool:
    body = client.post("/search", json={"query": query, "limit": 5}).json()
    hit = next((h for h in body["hits"] if h["id"] == episode_id), None)
    return not body["degraded"] and hit is not None and hit["vector"] is not None


def _sample(exposition: str, name: str) -> float:
    return float(next(line.split()[-1] for line in exposition.splitlines() if line.startswith(name + " ")))


def _lock_free(db: Path) -> bool:
    lock = OwnerLock(f"{db}.owner")
    if lock.try_acquire():
        lock.release()
        return True
    return False


def test_the_index_is_owned_by_a_process_that_is_not_the_http_one(tmp_path):
    db = tmp_path / "memory.db"
    with ServiceProcess(service_env(db)) as server, httpx.Client(base_url=server.url, timeout=10.0) as client:
        (host,) = until(lambda: index_hosts(server.pid), "the index host")
        owner = until(lambda: _owner(client).get("pid") and _owner(client), "the host to answer")
        assert owner == {"pid": host, "thisWorker": False}
        assert host != server.pid
        session = client.post("/sessions", json={"externalId": "apart"}).json()["id"]
        episode = client.post("/episodes", json={"sessionId": session, "userMessage": "the lighthouse keeper "
                                                 "polishes the lens", "aiResponse": "noted"}).json()
        # Embedded and indexed by the host; the HTTP process's vector leg reaches it over the socket.
        until(lambda: _hybrid_hit(client, "lighthouse lens", episode["id"]), "a hybrid hit")
        metrics = client.get("/metrics").text
        assert f'memory_worker{{pid="{server.pid}",role="follower"}} 1.0' in metrics
        assert _sample(metrics, "memory_embed_calls_total") >= 1  # counted in the host, summed here
        assert Path(f"{db}.sock").stat().st_mode & 0o777 == 0o600
        assert not _lock_free(db)  # the host holds the owner lock
        assert server.stop() == 0, server.stderr()


def test_a_killed_index_host_is_restarted_and_loses_nothing(tmp_path):
    db = tmp_path / "memory.db"
    with ServiceProcess(service_env(db)) as server, httpx.Client(base_url=server.url, timeout=10.0) as client:
        (first,) = until(lambda: index_hosts(server.pid), "the index host")
        until(lambda: _owner(client).get("pid") == first, "the host to answer")
        session = client.post("/sessions", json={"externalId": "host-kill"}).json()["id"]
        with WriteLoad(server.url, session, threads=4, tag="hostkill") as load:
            load.wait_for(40)
            os.kill(first, signal.SIGKILL)
            until(lambda: not alive(first), "the host to die")
            # Meanwhile searches answer (from keywords) and writes go on.
            assert client.post("/search", json={"query": "hostkill"}).status_code == 200
            load.wait_for(load.acknowledged.total() + 80)
        assert load.acknowledged.refused == []
        (second,) = until(lambda: (found := index_hosts(server.pid)) and first not in found and found,
                          "another index host")
        until(lambda: _owner(client).get("pid") == second, "the new host to own the index")
        for episode_id in load.acknowledged.episodes:
            assert client.get(f"/episodes/{episode_id}").status_code == 200
        # Every acknowledged write reaches the index again: one point per row, nothing pending.
        wait_for_health(server.url, lambda b: index_settled(b) and b["components"]["embeddingBacklog"]["pending"] == 0
                        and b["components"]["vectorIndex"]["status"] == "ok", timeout=120)
        late = client.post("/episodes", json={"sessionId": session, "userMessage": "zebra crossing at dawn",
                                              "aiResponse": "noted"}).json()
        until(lambda: _hybrid_hit(client, "zebra dawn", late["id"]), "vector search to recover")
        assert "index host (pid" in server.stderr() and "exited with code -9" in server.stderr()
        assert server.stop() == 0, server.stderr()


def test_kill_9_of_the_service_leaves_no_process_and_frees_the_lock(tmp_path):
    db = tmp_path / "memory.db"
    with ServiceProcess(service_env(db)) as server:
        until(lambda: index_hosts(server.pid), "the index host")
        processes = tree(server.pid)
        assert len(processes) >= 2
        server.kill()
        until(lambda: not any(alive(pid) for pid in processes), "every process of the service to die", 30)
        assert _lock_free(db)
        server.start()  # the port, the lock and the shards are free again
        assert httpx.get(f"{server.url}/health").status_code == 200
        assert server.stop() == 0, server.stderr()


def test_sigterm_stops_the_http_side_and_the_host_cleanly(tmp_path):
    db = tmp_path / "memory.db"
    with ServiceProcess(service_env(db)) as server:
        (host,) = until(lambda: index_hosts(server.pid), "the index host")
        session = httpx.post(f"{server.url}/sessions", json={"externalId": "drain"}).json()["id"]
        with WriteLoad(server.url, session, threads=4, tag="drain") as load:
            load.wait_for(40)
            processes = tree(server.pid)
            assert host in processes
            code = server.stop()
        assert code == 0, server.stderr()
        assert not alive(host)  # stopped before the service exited
        # multiprocessing's resource tracker ends when it reads the end of its pipe
        until(lambda: not any(alive(pid) for pid in processes), "every process of the service to end", 30)
        assert "stopped with exit code" not in server.stderr() and "did not stop" not in server.stderr()
        assert _lock_free(db) and not Path(f"{db}.sock").exists()
        server.start()
        for episode_id in load.acknowledged.episodes:
            assert httpx.get(f"{server.url}/episodes/{episode_id}").status_code == 200
        assert load.acknowledged.refused == []
        assert server.stop() == 0, server.stderr()
