"""The embedder fails in every way a real one does; writes and keyword search carry on, hybrid
search degrades to its keyword leg and says so, /health reports the failure and the backlog,
and after recovery the backlog drains with one vector per record.

A real ``memory-service serve`` (SQLite file, embedded Qdrant Edge, EMBEDDER=ollama) against an
in-test Ollama-compatible HTTP server switched into each failure mode.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.embedding_servers import FAILURE_MODES, EmbeddingTestServer
from tests.support.process import service_stats, wait_for_backlog, wait_for_health
from tests.support.server import ServiceProcess, service_env

pytestmark = pytest.mark.e2e

DIMENSION = 16
EPISODES = 12


@pytest.fixture
def embedder():
    # slow answers take 3 s against a 0.5 s client timeout
    with EmbeddingTestServer("ollama", dimension=DIMENSION, slow_seconds=3.0) as server:
        yield server


def _embedder_down(body: dict) -> bool:
    return body["components"]["embedder"]["status"] == "down"


@pytest.mark.parametrize("mode", FAILURE_MODES)
def test_an_embedder_failure_delays_vectors_but_loses_nothing(tmp_path, embedder, mode):
    env = service_env(tmp_path / "memory.db", {
        "EMBEDDER": "ollama", "OLLAMA_URL": embedder.url, "EMBEDDING_DIM": str(DIMENSION),
        "EMBEDDING_TIMEOUT": "0.5",
    })
    embedder.mode = mode
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        session_id = http.post("/sessions", json={"externalId": f"faults-{mode}"}).json()["id"]
        for n in range(EPISODES):
            response = http.post("/episodes", json={"sessionId": session_id, "userMessage": f"kiwi number {n}",
                                                    "aiResponse": "noted"})
            assert response.status_code == 201, response.text
        entity = http.post("/entities", json={"name": "Kiwi", "type": "fruit", "notes": "green"})
        assert entity.status_code == 201

        keyword = http.get("/episodes/search", params={"q": "kiwi", "limit": 50})
        assert keyword.status_code == 200
        assert len(keyword.json()["results"]) == EPISODES

        hybrid = http.post("/search", json={"query": "kiwi", "limit": 50})
        assert hybrid.status_code == 200, hybrid.text
        assert hybrid.json()["degraded"] is True
        assert len(hybrid.json()["hits"]) == EPISODES

        health = wait_for_health(server.url, _embedder_down)
        assert health["status"] == "degraded"
        assert health["components"]["embedder"]["error"]
        assert health["components"]["embeddingBacklog"]["pending"] >= EPISODES

        embedder.mode = "ok"
        health = wait_for_backlog(server.url, pending=0)
        assert health["components"]["embeddingBacklog"]["failing"] == 0
        wait_for_health(server.url, lambda body: body["status"] == "ok")
        recovered = http.post("/search", json={"query": "kiwi", "limit": 50}).json()
        assert recovered["degraded"] is False
        assert len(recovered["hits"]) == EPISODES
        assert "Traceback" not in server.stderr()

    stats = service_stats(env)
    assert stats["vectors"]["episodes"] == stats["rows"]["episodes"] == EPISODES
    assert stats["vectors"]["entities"] == stats["rows"]["entities"] == 1
    assert stats["backlog"]["pending"] == 0
