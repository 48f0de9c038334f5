"""GET /health, the optional API key, and the OpenAPI schema."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from app.container import build_container
from app.main import create_app
from tests.api.test_errors import assert_error

COMPONENTS = {"store", "vectorIndex", "embedder", "embeddingBacklog"}


def test_health_reports_ok_and_every_component(client):
    response = client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"status", "components"}
    assert body["status"] == "ok"
    components = body["components"]
    assert set(components) == COMPONENTS
    assert components["store"] == {"status": "ok", "error": None}
    assert components["vectorIndex"]["status"] == "ok" and components["vectorIndex"]["kind"] == "memory"
    embedder = components["embedder"]
    assert (embedder["status"], embedder["reachable"], embedder["dimension"], embedder["kind"]) == (
        "ok", True, 16, "fake")
    assert set(components["embeddingBacklog"]) == {"pending", "failing", "oldestAgeSeconds", "lastError"}


def test_health_shows_the_embedding_backlog(make_settings):
    # No worker: what is written stays in the outbox, so the backlog is exactly what was written.
    with TestClient(create_app(make_settings(worker_enabled=False))) as client:
        session = client.post("/sessions", json={"externalId": "backlog"}).json()["id"]
        for i in range(3):
            client.post("/episodes", json={"sessionId": session, "userMessage": f"m{i}", "aiResponse": "r"})
        backlog = client.get("/health").json()["components"]["embeddingBacklog"]
    assert backlog["pending"] == 3
    assert backlog["failing"] == 0
    assert isinstance(backlog["oldestAgeSeconds"], float) and backlog["oldestAgeSeconds"] >= 0


def test_health_is_degraded_but_answers_when_the_embedder_is_down(make_settings):
    settings = make_settings()
    container = build_container(settings)
    container.embedder().go_down()
    with TestClient(create_app(settings, container)) as client:
        response = client.get("/health")
        assert response.status_code == 200
        body = response.json()
        assert body["status"] == "degraded"
        assert body["components"]["embedder"]["status"] == "down"
        assert body["components"]["embedder"]["error"]
        assert body["components"]["store"]["status"] == "ok"
        session = client.post("/sessions", json={"externalId": "still-writable"})
        assert session.status_code == 201


@pytest.fixture
def locked(make_settings):
    with TestClient(create_app(make_settings(memory_api_key="s3cret-key"))) as client:
        yield client


def test_with_an_api_key_health_stays_open(locked):
    assert locked.get("/health").status_code == 200


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-key"},
                                     {"Authorization": "Basic s3cret-key"}, {"Authorization": "Bearer "}])
def test_with_an_api_key_other_routes_need_the_bearer_token(locked, headers):
    body = assert_error(locked.get("/sessions", headers=headers), 401)
    assert "s3cret" not in body["message"]
    assert_error(locked.post("/sessions", json={"externalId": "x"}, headers=headers), 401)


def test_with_the_right_bearer_token_routes_answer(locked):
    headers = {"Authorization": "Bearer s3cret-key"}
    assert locked.post("/sessions", json={"externalId": "x"}, headers=headers).status_code == 201
    assert locked.get("/sessions", headers=headers).json()["total"] == 1


EXPECTED_OPERATIONS = {
    ("get", "/health"),
    ("post", "/sessions"), ("get", "/sessions"), ("get", "/sessions/{session_id}"),
    ("patch", "/sessions/{session_id}"), ("delete", "/sessions/{session_id}"),
    ("get", "/sessions/by-external/{external_id}"), ("get", "/sessions/{session_id}/episodes"),
    ("get", "/sessions/{session_id}/summaries"),
    ("post", "/episodes"), ("post", "/episodes/batch"), ("get", "/episodes/search"),
    ("get", "/episodes/{episode_id}"), ("patch", "/episodes/{episode_id}"), ("delete", "/episodes/{episode_id}"),
    ("post", "/entities"), ("get", "/entities/by-type/{entity_type}"), ("get", "/entities/search"),
    ("get", "/entities/{entity_id}"), ("delete", "/entities/{entity_id}"),
    ("get", "/entities/{entity_id}/relationships"),
    ("post", "/relationships"), ("delete", "/relationships"),
    ("post", "/summaries"), ("get", "/summaries/{summary_id}"), ("delete", "/summaries/{summary_id}"),
    ("post", "/search"), ("post", "/context"), ("get", "/rankers"),
}


def test_the_openapi_schema_lists_every_route(client):
    response = client.get("/schema/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    operations = {(method, path) for path, item in schema["paths"].items() for method in item
                  if method in ("get", "post", "patch", "put", "delete")}
    assert EXPECTED_OPERATIONS <= operations, EXPECTED_OPERATIONS - operations


def test_the_openapi_schema_uses_camel_case_bodies(client):
    schemas = client.get("/schema/openapi.json").json()["components"]["schemas"]
    episode_request = next(s for name, s in schemas.items() if name.endswith("CreateEpisode"))
    assert {"sessionId", "userMessage", "aiResponse"} <= set(episode_request["properties"])
    assert set(episode_request["required"]) == {"sessionId", "userMessage", "aiResponse"}


def test_the_docs_ui_is_served(client):
    assert client.get("/schema/swagger").status_code == 200
