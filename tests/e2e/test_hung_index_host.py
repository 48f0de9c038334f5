"""An index host that is alive but does not answer (SIGSTOP) costs a search ``VECTOR_QUERY_TIMEOUT``
(default 5 s), not the socket's 30 s call timeout: each HTTP worker (``WORKERS=2``, ``EMBEDDER=hash``,
so the workers embed their queries themselves and the vector search is the host's part) answers
``/search`` 200 from keywords, ``degraded``; ``/metrics`` answers too. Once the host runs again,
searches are hybrid again. Real processes, a real stopped process; every wait bounded."""

from __future__ import annotations

import os
import signal

import httpx

from tests.support.process import wait_for_backlog
from tests.support.process_tree import index_hosts, until
from tests.support.searching import hybrid_hit, search
from tests.support.server import ServiceProcess, service_env
from tests.support.workers import worker_of

BOUND = 15.0  # seconds a request may take while the host is stopped: well under the 30 s call timeout


def _on_each_worker(url: str, check) -> dict[int, object]:
    """``check(client)`` on fresh connections until both workers answered it truly (the kernel
    picks the worker per connection; a keep-alive connection idle for 5 s may be dropped, so
    each check asks right after which worker it reached): the pids and what ``check`` returned."""
    seen: dict[int, object] = {}

    def once() -> bool:
        with httpx.Client(base_url=url, timeout=BOUND) as client:  # a slower answer is an httpx timeout
            if found := check(client):
                seen[worker_of(client)[0]] = found
        return len(seen) == 2

    until(once, "both workers")
    return seen


def test_a_stopped_index_host_costs_a_search_the_query_timeout_and_hybrid_search_returns_with_it(tmp_path):
    env = service_env(tmp_path / "memory.db", {"WORKERS": "2"})  # VECTOR_QUERY_TIMEOUT: the default
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url, timeout=BOUND) as client:
        (host,) = until(lambda: index_hosts(server.pid), "the index host")
        session = client.post("/sessions", json={"externalId": "hung-host"}).json()["id"]
        kitten = client.post("/episodes", json={"sessionId": session, "userMessage": "I adopted a grey kitten "
                                                "named Pixel", "aiResponse": "Lovely name."}).json()["id"]
        wait_for_backlog(server.url, pending=0)
        _on_each_worker(server.url, lambda c: hybrid_hit(c, "kitten Pixel", kitten))

        def from_keywords(c: httpx.Client) -> list[str]:
            body = search(c, "kitten Pixel")
            assert body["degraded"] and [h["id"] for h in body["hits"]] == [kitten], body
            assert all(h["vector"] is None for h in body["hits"])
            assert c.get("/metrics").status_code == 200  # its point counts are bounded too
            return body["warnings"]

        os.kill(host, signal.SIGSTOP)
        try:
            # Each worker: its first search waits for the bound, the later ones not (not asserted).
            warnings = _on_each_worker(server.url, from_keywords)
            warnings.update(_on_each_worker(server.url, from_keywords))
            assert client.get("/health").status_code == 200
        finally:
            os.kill(host, signal.SIGCONT)
        assert all(any("vector index unavailable" in w for w in found) for found in warnings.values()), warnings

        _on_each_worker(server.url, lambda c: hybrid_hit(c, "kitten Pixel", kitten))  # once the host runs again
        assert index_hosts(server.pid) == {host}  # the same host: it was stopped, never replaced
        assert server.stop() == 0, server.stderr()
