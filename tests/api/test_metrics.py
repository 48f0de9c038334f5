"""``GET /metrics``: Prometheus text, one registry per app, store figures read at scrape time."""

from __future__ import annotations

from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.main import create_app


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return _samples(response.text)


def test_requests_are_counted_by_route_template_and_status(client, session_id):
    for _ in range(3):
        client.get(f"/sessions/{session_id}")
    client.get("/sessions/424242")
    samples = _scrape(client)
    ok = (("method", "GET"), ("route", "/sessions/{session_id}"), ("status", "200"))
    missing = (("method", "GET"), ("route", "/sessions/{session_id}"), ("status", "404"))
    assert samples[("memory_http_requests_total", ok)] == 3
    assert samples[("memory_http_requests_total", missing)] == 1
    assert samples[("memory_http_request_duration_seconds_count", ok)] == 3
    assert not any(f"/sessions/{session_id}" == dict(labels).get("route") for _, labels in samples)


def test_store_rows_and_backlog_are_read_at_scrape_time(make_settings):
    with TestClient(create_app(make_settings(worker_enabled=False))) as client:
        sid = client.post("/sessions", json={"externalId": "m"}).json()["id"]
        for i in range(2):
            client.post("/episodes", json={"sessionId": sid, "userMessage": f"hi {i}", "aiResponse": "hello"})
        samples = _scrape(client)
    assert samples[("memory_store_rows", (("table", "episodes"),))] == 2
    assert samples[("memory_store_rows", (("table", "sessions"),))] == 1
    assert samples[("memory_embedding_backlog_jobs", ())] == 2
    assert samples[("memory_embedding_backlog_oldest_age_seconds", ())] >= 0
    assert samples[("memory_vector_points", (("collection", "episodes"),))] == 0


def test_embed_calls_and_vector_counts_follow_the_worker(make_settings):
    app = create_app(make_settings(worker_enabled=False))
    with TestClient(app) as client:
        sid = client.post("/sessions", json={"externalId": "w"}).json()["id"]
        client.post("/episodes", json={"sessionId": sid, "userMessage": "the worker", "aiResponse": "embeds"})
        with client.portal() as portal:
            portal.call(app.state.container.indexing().run_once)
        samples = _scrape(client)
    assert samples[("memory_embed_calls_total", ())] >= 1
    assert samples[("memory_embed_failures_total", ())] == 0
    assert samples[("memory_embedding_backlog_jobs", ())] == 0
    assert samples[("memory_vector_points", (("collection", "episodes"),))] == 1


def test_search_legs_are_observed(client, session_id):
    client.post("/episodes", json={"sessionId": session_id, "userMessage": "lighthouse", "aiResponse": "ok"})
    client.post("/search", json={"query": "lighthouse"})
    samples = _scrape(client)
    assert samples[("memory_search_leg_duration_seconds_count", (("leg", "vector"),))] == 1
    assert samples[("memory_search_leg_duration_seconds_count", (("leg", "keyword"),))] == 1


def test_two_apps_in_one_process_keep_their_own_counts(make_settings, tmp_path):
    with TestClient(create_app(make_settings())) as first, \
            TestClient(create_app(make_settings(sqlite_path=str(tmp_path / "other.db")))) as second:
        first.get("/sessions")
        first.get("/sessions")
        second.get("/sessions")
        labels = (("method", "GET"), ("route", "/sessions"), ("status", "200"))
        assert _scrape(first)[("memory_http_requests_total", labels)] == 2
        assert _scrape(second)[("memory_http_requests_total", labels)] == 1


def test_metrics_need_the_api_key_when_one_is_set(make_settings):
    with TestClient(create_app(make_settings(memory_api_key="k3y"))) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/health").status_code == 200
        assert client.get("/metrics", headers={"Authorization": "Bearer k3y"}).status_code == 200


def test_a_refused_idempotency_key_is_counted_and_logged_as_its_4xx_not_a_500(client, caplog):
    with caplog.at_level("ERROR"):
        assert client.post("/sessions", json={"externalId": "k"}, headers={"Idempotency-Key": "k" * 300}).status_code == 400
        assert client.post("/sessions", json={"externalId": "k1"}, headers={"Idempotency-Key": "same"}).status_code == 201
        assert client.post("/sessions", json={"externalId": "k2"}, headers={"Idempotency-Key": "same"}).status_code == 422
    samples = _scrape(client)
    counted = {dict(labels)["status"]: value for (name, labels), value in samples.items()
               if name == "memory_http_requests_total" and dict(labels).get("route") == "/sessions"
               and dict(labels).get("method") == "POST"}
    assert counted == {"400": 1, "201": 1, "422": 1}
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
