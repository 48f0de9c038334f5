"""``WORKERS=2``: one listening socket, two real worker processes under uvicorn's supervisor.

Which worker answers is the kernel's choice per connection, so each test holds keep-alive
connections and asks ``/health`` on each which worker it reached (``owner.thisWorker``): a pair
of connections then talks to the index owner and to a follower for sure. Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from tests.support.process import WriteLoad, wait_for_health
from tests.support.server import ServiceProcess, service_env

CONNECT_ATTEMPTS = 200  # fresh connections tried until both workers have been reached
WAIT_SECONDS = 60.0


def _env(db: Path, **extra: str) -> dict[str, str]:
    return service_env(db, {"WORKERS": "2", **extra})


def _role(client: httpx.Client) -> tuple[bool, int]:
    """(this connection's worker owns the index, the owner's pid), from /health on it."""
    owner = client.get("/health").json()["components"]["vectorIndex"].get("index", {}).get("owner") or {}
    return bool(owner.get("thisWorker")), owner.get("pid")


def _owner_and_follower(url: str) -> tuple[httpx.Client, httpx.Client, int]:
    """A keep-alive connection to the index owner, one to a follower, and the owner's pid."""
    found: dict[bool, httpx.Client] = {}
    owner_pid = None
    for _ in range(CONNECT_ATTEMPTS):
        client = httpx.Client(base_url=url, timeout=10.0, limits=httpx.Limits(max_connections=1))
        try:
            mine, owner_pid = _role(client)
        except (httpx.HTTPError, KeyError):
            client.close()
            time.sleep(0.05)
            continue
        if mine in found or owner_pid is None:
            client.close()
            continue
        found[mine] = client
        if len(found) == 2:
            return found[True], found[False], owner_pid
    for client in found.values():
        client.close()
    raise AssertionError(f"could not reach both an owner and a follower in {CONNECT_ATTEMPTS} connections")


def _children(parent: int) -> set[int]:
    """The worker processes of ``parent`` (multiprocessing's resource tracker excluded)."""
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
        if ppid == parent and b"spawn_main" in cmdline:
            found.add(int(entry.name))
    return found


def _sample(exposition: str, name: str) -> float:
    return float(next(line.split()[-1] for line in exposition.splitlines() if line.startswith(name + " ")))


def _metrics_dir(worker: int) -> Path:
    """The directory the supervisor gave ``worker`` for prometheus-client's multiprocess files."""
    environ = dict(item.split(b"=", 1) for item in Path(f"/proc/{worker}/environ").read_bytes().split(b"\0") if b"=" in item)
    return Path(environ[b"PROMETHEUS_MULTIPROC_DIR"].decode())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "(Z)" not in Path(f"/proc/{pid}/stat").read_text()[:64] \
        and " Z " not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:4]


def _until(predicate, what: str, timeout: float = WAIT_SECONDS):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := predicate()):
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _hybrid_hit(client: httpx.Client, query: str, episode_id: int) -> bool:
    body = client.post("/search", json={"query": query, "limit": 5}).json()
    hit = next((h for h in body["hits"] if h["id"] == episode_id), None)
    return not body["degraded"] and hit is not None and hit["vector"] is not None


def test_two_workers_see_each_others_writes_and_a_follower_answers_hybrid_search(tmp_path):
    with ServiceProcess(_env(tmp_path / "memory.db")) as server:
        assert len(_children(server.pid)) == 2
        owner, follower, _ = _owner_and_follower(server.url)
        with closing(owner), closing(follower):
            session = follower.post("/sessions", json={"externalId": "shared"}).json()["id"]
            by_follower = follower.post("/episodes", json={
                "sessionId": session, "userMessage": "the lighthouse keeper polishes the lens",
                "aiResponse": "noted"}).json()
            by_owner = owner.post("/episodes", json={
                "sessionId": session, "userMessage": "a walrus naps on the harbour wall",
                "aiResponse": "noted"}).json()
            assert owner.get(f"/episodes/{by_follower['id']}").json()["userMessage"].startswith("the lighthouse")
            assert follower.get(f"/episodes/{by_owner['id']}").json()["userMessage"].startswith("a walrus")
            assert [e["id"] for e in follower.get(f"/sessions/{session}/episodes").json()["items"]] == \
                [by_follower["id"], by_owner["id"]]
            # The follower's vector leg is answered by the owner's index over the socket.
            _until(lambda: _hybrid_hit(follower, "lighthouse lens", by_follower["id"]), "a hybrid hit on the follower")
            _until(lambda: _hybrid_hit(follower, "walrus harbour", by_owner["id"]), "the owner's write indexed")
            # Its /health reports the owner's index (checked in the background: polled, bounded).
            _until(lambda: (c := follower.get("/health").json()["components"]["vectorIndex"])["status"] == "ok"
                   and c["points"]["episodes"] == 2, "the follower's health to count both points")
            # /metrics says which worker answered; the data gauges are read from the shared store.
            follower_metrics, owner_metrics = follower.get("/metrics").text, owner.get("/metrics").text
            assert 'role="follower"} 1.0' in follower_metrics and 'role="owner"} 1.0' in owner_metrics
            assert 'memory_store_rows{table="episodes"} 2.0' in follower_metrics
            # Counters add up over the workers whichever answers: one POST reached each of them,
            # and only the owner embeds.
            posts = 'memory_http_requests_total{method="POST",route="/episodes",status="201"} 2.0'
            assert posts in follower_metrics and posts in owner_metrics
            assert _sample(follower_metrics, "memory_embed_calls_total") >= 1
            assert _sample(follower_metrics, "memory_embed_calls_total") == _sample(owner_metrics,
                                                                                    "memory_embed_calls_total")
        socket_file = Path(f"{tmp_path / 'memory.db'}.sock")
        assert socket_file.stat().st_mode & 0o777 == 0o600
        metrics_dir = _metrics_dir(next(iter(_children(server.pid))))
        assert metrics_dir.stat().st_mode & 0o777 == 0o700 and any(metrics_dir.glob("counter_*.db"))
        assert server.stop() == 0, server.stderr()
    assert not socket_file.exists()
    assert not metrics_dir.exists()


def test_killing_the_index_owner_hands_the_index_to_another_worker_and_loses_no_write(tmp_path):
    with ServiceProcess(_env(tmp_path / "memory.db")) as server:
        owner, follower, owner_pid = _owner_and_follower(server.url)
        owner.close()
        with closing(follower):
            session = follower.post("/sessions", json={"externalId": "failover"}).json()["id"]
            with WriteLoad(server.url, session, threads=4, tag="failover") as load:
                _until(lambda: load.acknowledged.total() >= 40, "writes before the kill")
                os.kill(owner_pid, signal.SIGKILL)
                _until(lambda: not _alive(owner_pid), "the owner to die")
                # Meanwhile the follower's searches answer from keywords and say why.
                degraded = follower.post("/search", json={"query": "failover"}).json()
                _until(lambda: load.acknowledged.total() >= 120, "writes after the kill")
            assert load.acknowledged.refused == []
            new_owner = _until(lambda: (pid := _role(follower)[1]) not in (None, owner_pid) and pid,
                               "another worker to own the index")
            assert _alive(new_owner)
            _until(lambda: len(_children(server.pid)) == 2, "the supervisor to replace the killed worker")
            for episode_id in load.acknowledged.episodes:
                assert follower.get(f"/episodes/{episode_id}").status_code == 200
            late = follower.post("/episodes", json={"sessionId": session, "userMessage": "zebra crossing at dawn",
                                                    "aiResponse": "noted"}).json()
            _until(lambda: _hybrid_hit(follower, "zebra dawn", late["id"]), "vector search to recover")
            wait_for_health(server.url, lambda b: b["components"]["embeddingBacklog"]["pending"] == 0)
        assert degraded["hits"] is not None  # answered (keyword leg) while no one owned the index
        assert server.stop() == 0, server.stderr()


def test_a_killed_follower_is_replaced_and_sigterm_drains_every_worker(tmp_path):
    with ServiceProcess(_env(tmp_path / "memory.db")) as server:
        owner, follower, owner_pid = _owner_and_follower(server.url)
        owner.close()
        follower.close()
        first = _children(server.pid)
        (victim,) = first - {owner_pid}
        os.kill(victim, signal.SIGKILL)
        replaced = _until(lambda: (now := _children(server.pid)) - first and len(now) == 2 and now,
                          "a replacement worker")
        assert owner_pid in replaced and victim not in replaced
        session = httpx.post(f"{server.url}/sessions", json={"externalId": "drain"}).json()["id"]
        with WriteLoad(server.url, session, threads=4, tag="drain") as load:
            _until(lambda: load.acknowledged.total() >= 40, "writes before SIGTERM")
            workers = _children(server.pid)
            code = server.stop()
        assert code == 0, server.stderr()
        assert not any(_alive(pid) for pid in workers)
        server.start()
        for episode_id in load.acknowledged.episodes:
            assert httpx.get(f"{server.url}/episodes/{episode_id}").status_code == 200
        assert load.acknowledged.refused == []


def test_kill_9_of_the_supervisor_leaves_no_worker_behind(tmp_path):
    with ServiceProcess(_env(tmp_path / "memory.db")) as server:
        workers = _children(server.pid)
        assert len(workers) == 2
        server.kill()
        _until(lambda: not any(_alive(pid) for pid in workers), "the workers to die with their parent", 30)
        server.start()  # the port and the index are free again
        assert httpx.get(f"{server.url}/health").status_code == 200
        assert server.stop() == 0, server.stderr()


@pytest.mark.parametrize("variables", [{"STORE": "memory"}, {"SQLITE_PATH": ":memory:"}])
def test_several_workers_over_a_store_they_cannot_share_is_a_configuration_error(tmp_path, variables):
    from tests.support.server import run_service

    result = run_service(["serve"], _env(tmp_path / "memory.db", **variables))
    assert result.returncode == 2
    assert "WORKERS: must be 1 when" in result.stderr
