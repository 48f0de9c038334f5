"""With the default in-process model, ``serve`` loads it once, in the index host: the HTTP
processes (here ``WORKERS=2``) send their queries to the host over the index socket. When the host
is killed or stops answering, hybrid search answers from keywords (degraded), within
``VECTOR_QUERY_TIMEOUT`` (the default, 5 s; ``EMBEDDING_TIMEOUT`` is 30 s), never a 500 and never a
hang; it comes back with the host. Real processes, the real packaged model, every wait bounded."""

from __future__ import annotations

import os
import re
import signal

import httpx

from tests.support.process import wait_for_backlog
from tests.support.process_tree import alive, index_hosts, until
from tests.support.searching import hybrid_hit, search
from tests.support.server import ServiceProcess, service_env

LOADED = re.compile(r"embedder: local model \S+ loaded")


def test_two_http_workers_and_the_host_load_the_model_once_and_search_by_meaning(tmp_path):
    env = service_env(tmp_path / "memory.db", {"WORKERS": "2", "LOG_LEVEL": "info"})
    for variable in ("EMBEDDER", "EMBEDDING_DIM", "EMBEDDING_MODEL"):
        env.pop(variable, None)  # the default: EMBEDDER=local, all-MiniLM-L6-v2 in numpy
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url, timeout=30.0) as client:
        (host,) = until(lambda: index_hosts(server.pid), "the index host")
        session = client.post("/sessions", json={"externalId": "one-model"}).json()["id"]
        kitten = client.post("/episodes", json={"sessionId": session, "userMessage": "I adopted a grey kitten "
                                                "named Pixel", "aiResponse": "Lovely name."}).json()["id"]
        client.post("/episodes", json={"sessionId": session, "userMessage": "The quarterly tax filing is due",
                                       "aiResponse": "Noted."})
        wait_for_backlog(server.url, pending=0)
        # "pet cat" shares no word with the kitten: only the vector leg finds it by meaning.
        until(lambda: hybrid_hit(client, "my new pet cat", kitten), "a hybrid hit answered by a worker")
        embedder = until(lambda: (e := client.get("/health").json()["components"]["embedder"])["status"] == "ok"
                         and e, "the embedder to report ok")
        assert (embedder["kind"], embedder["model"], embedder["dimension"]) == ("local", "all-MiniLM-L6-v2", 384)
        workers = {int(w) for w in re.findall(r'memory_worker\{pid="(\d+)"', client.get("/metrics").text)}
        assert host not in workers

        # A host that stops answering: the query's embedding times out, keywords answer (a slower
        # answer than 15 s is an httpx timeout).
        os.kill(host, signal.SIGSTOP)
        try:
            body = search(client, "kitten Pixel", timeout=15.0)
            assert body["degraded"] and body["hits"][0]["id"] == kitten
            assert all(h["vector"] is None for h in body["hits"])
            assert any("embedder unavailable" in w for w in body["warnings"]), body["warnings"]
        finally:
            os.kill(host, signal.SIGCONT)
        until(lambda: hybrid_hit(client, "my new pet cat", kitten), "vector search once the host answers again")

        # A killed host: keywords answer at once; a new host loads the model and the vectors come back.
        os.kill(host, signal.SIGKILL)
        until(lambda: not alive(host), "the host to die")
        body = search(client, "kitten Pixel")
        assert body["degraded"] and body["hits"][0]["id"] == kitten
        until(lambda: (found := index_hosts(server.pid)) and host not in found, "another index host")
        until(lambda: hybrid_hit(client, "my new pet cat", kitten), "vector search from the new host", 120)
        assert server.stop() == 0, server.stderr()

    stderr = server.stderr()
    # Once per host: the first and the one that replaced it; never in an HTTP worker.
    assert len(LOADED.findall(stderr)) == 2, stderr[-4000:]
    assert "embedder: local (in the index host) reachable" in stderr
