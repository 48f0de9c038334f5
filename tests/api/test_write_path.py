"""The durable embedding write path across restarts, on the embedded default (SQLite + Qdrant Edge)."""

from __future__ import annotations


from litestar.testing import TestClient

from app.main import create_app
from tests.support.process import backlog_pending, fresh_health


def wait_drained(client: TestClient, timeout: float = 30.0) -> dict:
    return fresh_health(client, lambda body: backlog_pending(body) == 0, timeout)["components"]["embeddingBacklog"]


def test_a_restart_with_a_non_empty_outbox_drains_it_into_qdrant_edge(make_settings, tmp_path):
    settings = make_settings(vector_index="edge", qdrant_path=str(tmp_path / "vectors"), embedder="hash",
                             embedding_dim=32)
    with TestClient(create_app(settings.with_overrides(worker_enabled=False))) as client:
        sid = client.post("/sessions", json={"externalId": "restart"}).json()["id"]
        batch = [{"sessionId": sid, "userMessage": f"note {i} about gardening", "aiResponse": "ok"} for i in range(20)]
        assert client.post("/episodes/batch", json={"episodes": batch}).status_code == 201
        assert backlog_pending(fresh_health(client)) == 20
    with TestClient(create_app(settings)) as client:
        wait_drained(client)
        body = client.post("/search", json={"query": "note 7 about gardening", "sessionId": sid,
                                             "ranker": "vector"}).json()
        assert body["degraded"] is False
        assert body["hits"][0]["episode"]["userMessage"] == "note 7 about gardening"
    # Every episode has exactly one point, and deletes made after the restart reach the index too.
    with TestClient(create_app(settings)) as client:
        assert client.delete(f"/sessions/{sid}").status_code == 204
        wait_drained(client)
        body = client.post("/search", json={"query": "gardening", "ranker": "vector"}).json()
        assert body["hits"] == []

def test_every_episode_gets_exactly_one_point(make_settings, tmp_path):
    settings = make_settings(vector_index="edge", qdrant_path=str(tmp_path / "vectors"), embedder="hash",
                             embedding_dim=32)
    with TestClient(create_app(settings)) as client:
        sid = client.post("/sessions", json={"externalId": "once"}).json()["id"]
        ids = [client.post("/episodes", json={"sessionId": sid, "userMessage": f"m{i}", "aiResponse": "r"}).json()["id"]
               for i in range(30)]
        client.patch(f"/episodes/{ids[0]}", json={"userMessage": "changed text"})
        wait_drained(client)
        metrics = client.get("/metrics").text
    vectors = [line for line in metrics.splitlines() if "_vector_points{" in line and "episodes" in line]
    assert vectors and float(vectors[0].rsplit(" ", 1)[1]) == 30.0, vectors
