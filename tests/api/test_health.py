"""GET /health, the optional API key, and the OpenAPI schema."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from litestar.testing import TestClient

from app.container import build_container
from app.main import create_app
from tests.api.test_errors import assert_error
from tests.support.process import fresh_health

COMPONENTS = {"store", "disk", "vectorIndex", "embedder", "embeddingBacklog"}


def wait_health(client, predicate, path: str = "/health", headers=None, polls: int = 400) -> dict:
    """Poll until the background checks show what ``predicate`` wants (bounded, no timing asserted)."""
    body: dict = {}
    for _ in range(polls):
        body = client.get(path, headers=headers or {}).json()
        if predicate(body):
            return body
        time.sleep(0.01)
    raise AssertionError(f"{path} never reached the expected state: {body}")


def test_health_reports_ok_and_every_component(client):
    body = wait_health(client, lambda b: b["status"] == "ok")
    assert set(body) == {"status", "ready", "components"} and body["ready"] is True
    components = body["components"]
    assert set(components) == COMPONENTS
    assert components["store"]["status"] == "ok" and components["store"]["writable"] is True
    assert components["store"]["critical"] and components["disk"]["critical"]
    if os.environ.get("TEST_STORE") != "postgres":  # a database server's disk is not this host's to watch
        assert components["disk"]["freeBytes"] > 0
    assert components["vectorIndex"]["status"] == "ok" and components["vectorIndex"]["kind"] == "memory"
    embedder = components["embedder"]
    assert (embedder["status"], embedder["reachable"], embedder["dimension"], embedder["kind"]) == (
        "ok", True, 16, "fake")
    assert {"pending", "failing", "dead", "oldestAgeSeconds"} <= set(components["embeddingBacklog"])
    for component in components.values():
        assert component["checkedAt"] and component["ageSeconds"] >= 0


def test_liveness_and_readiness_routes(client):
    assert client.get("/health/live").json() == {"status": "ok"}
    wait_health(client, lambda b: b["status"] == "ready", "/health/ready")
    assert client.get("/health/ready").status_code == 200


def test_health_shows_the_embedding_backlog(make_settings):
    # No worker: what is written stays in the outbox, so the backlog is exactly what was written.
    with TestClient(create_app(make_settings(worker_enabled=False))) as client:
        session = client.post("/sessions", json={"externalId": "backlog"}).json()["id"]
        for i in range(3):
            client.post("/episodes", json={"sessionId": session, "userMessage": f"m{i}", "aiResponse": "r"})
        body = wait_health(client, lambda b: b["components"]["embeddingBacklog"].get("pending") == 3)
    backlog = body["components"]["embeddingBacklog"]
    assert backlog["failing"] == 0 and backlog["dead"] == 0
    assert isinstance(backlog["oldestAgeSeconds"], float) and backlog["oldestAgeSeconds"] >= 0


def test_health_is_degraded_but_answers_when_the_embedder_is_down(make_settings):
    settings = make_settings()
    container = build_container(settings)
    container.embedder().go_down()
    with TestClient(create_app(settings, container)) as client:
        body = wait_health(client, lambda b: b["status"] == "degraded")
        assert client.get("/health").status_code == 200
        assert body["components"]["embedder"]["status"] == "down"
        assert body["components"]["embedder"]["error"]
        assert body["components"]["store"]["status"] == "ok"
        assert client.get("/health/ready").status_code == 200  # the API still serves reads and writes
        session = client.post("/sessions", json={"externalId": "still-writable"})
        assert session.status_code == 201


@pytest.fixture
def locked(make_settings):
    with TestClient(create_app(make_settings(memory_api_key="s3cret-key"))) as client:
        yield client


def test_with_an_api_key_health_stays_open_but_shows_only_the_status(locked):
    response = locked.get("/health")
    assert response.status_code == 200 and set(response.json()) == {"status"}
    assert locked.get("/health/live").status_code == 200
    assert locked.get("/health/ready").status_code in (200, 503)
    full = wait_health(locked, lambda b: "components" in b, headers={"Authorization": "Bearer s3cret-key"})
    assert set(full["components"]) == COMPONENTS


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
    ("get", "/health"), ("get", "/health/live"), ("get", "/health/ready"),
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


def test_an_emptied_vector_index_is_reported_and_then_repaired(make_settings):
    # The check that finds the points gone reports it and wakes the repair at once; the next check
    # reports it repaired. Checks a second apart keep the report up long enough for a poll on a
    # busy machine to see it (at 50 ms, a poll held up for longer missed it).
    settings = make_settings(health_interval=1.0)
    container = build_container(settings)
    with TestClient(create_app(settings, container)) as client:
        sid = client.post("/sessions", json={"externalId": "lost-index"}).json()["id"]
        for i in range(3):
            client.post("/episodes", json={"sessionId": sid, "userMessage": f"m{i}", "aiResponse": "r"})
        fresh_health(client, lambda b: b["status"] == "ok" and b["components"]["embeddingBacklog"]["pending"] == 0)
        index, manager = container.vector_index(), container.index_manager()
        physical = manager.status()["collections"]["episodes"]["generation"]
        asyncio.run(index.delete(physical, list(range(1, 10))))  # the points vanish, no job is queued
        body = fresh_health(client, lambda b: b["components"]["vectorIndex"]["status"] != "ok")
        assert body["status"] == "degraded" and "episodes: diverged" in body["components"]["vectorIndex"]["error"]
        # ... and it is not left at that: verification runs at once and repairs from SQLite.
        healed = fresh_health(client, lambda b: b["components"]["vectorIndex"]["status"] == "ok")
    assert healed["components"]["vectorIndex"]["points"]["episodes"] == 3


def test_health_answers_starting_at_once_while_the_model_loads(make_settings):
    from dependency_injector import providers

    from tests.support.loading_embedder import GatedLocalEmbedder

    settings = make_settings(embedder="local", embedding_dim=None)
    container = build_container(settings)
    loading = GatedLocalEmbedder()
    container.embedder.override(providers.Object(loading))
    with TestClient(create_app(settings, container)) as client:
        # The embedder's own check has run and found the model loading; the body answered at once.
        starting = fresh_health(client, lambda b: b["components"]["embedder"]["checkedAt"] is not None)
        loading.gate.set()
        fresh_health(client, lambda b: b["status"] == "ok")
        session = client.post("/sessions", json={"externalId": "pets"}).json()["id"]
        client.post("/episodes", json={"sessionId": session, "userMessage": "I adopted a grey kitten named Pixel",
                                       "aiResponse": "Congratulations!"})
        # A search while the model was loading would wait for it (at most EMBEDDING_TIMEOUT); now it
        # is loaded, it is semantic.
        found = client.post("/search", json={"query": "my new pet cat", "sessionId": session}).json()
    assert starting["status"] == "starting"
    embedder = starting["components"]["embedder"]
    assert {k: embedder[k] for k in ("status", "reachable", "model", "dimension", "kind")} == {
        "status": "starting", "reachable": False, "model": "all-MiniLM-L6-v2", "dimension": 384, "kind": "local"}
    assert found["degraded"] is False


async def test_a_check_that_overruns_keeps_its_last_details_with_their_age_and_says_it_overran():
    # bench/index_bench.py and the CLI read components.vectorIndex.index: a check that answered
    # once and then hangs past its limit (an index busy building) must not drop those details.
    from app.health import DOWN, OK, HealthMonitor, Reading

    hang = asyncio.Event()
    calls = 0

    async def index_check() -> Reading:
        nonlocal calls
        calls += 1
        if calls > 1:
            await hang.wait()  # never set: hangs past the limit
        return Reading(OK, {"kind": "edge", "index": {"status": "consistent", "storeId": "s1"}})

    monitor = HealthMonitor(interval=60, timeout=0.05)
    monitor.add("vectorIndex", index_check)
    await monitor.refresh()
    assert monitor.snapshot()["vectorIndex"]["index"] == {"status": "consistent", "storeId": "s1"}
    for _ in range(2):  # twice: an overrun after an overrun still shows the last answered details
        await monitor.refresh()
        shown = monitor.snapshot()["vectorIndex"]
        assert shown["status"] == DOWN and shown["overran"] is True and "no answer within" in shown["error"]
        assert shown["index"] == {"status": "consistent", "storeId": "s1"} and shown["kind"] == "edge"
        assert shown["detailsAgeSeconds"] >= 0
    assert calls == 3


async def test_a_check_that_overruns_before_ever_answering_says_so_without_details():
    from app.health import DOWN, HealthMonitor, Reading

    async def hung() -> Reading:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    monitor = HealthMonitor(interval=60, timeout=0.05)
    monitor.add("embedder", hung)
    await monitor.refresh()
    shown = monitor.snapshot()["embedder"]
    assert shown["status"] == DOWN and shown["overran"] is True and "detailsAgeSeconds" not in shown


def test_health_probes_pass_the_request_gates_like_any_request(make_settings):
    # Probes go through the routes: the request id is echoed and each is counted under its route.
    application = create_app(make_settings(health_interval=3600))  # one round of checks
    with TestClient(application) as client:
        wait_health(client, lambda body: body["status"] == "ok")
        for path in ("/health", "/health/live", "/health/ready", "/health/"):
            answer = client.get(path, headers={"x-request-id": "probe-1"})
            assert answer.status_code == 200 and answer.headers["x-request-id"] == "probe-1", path
        assert client.head("/health/live").status_code == 200
    registry = application.state.metrics.registry
    for route, count in (("/health", 2.0), ("/health/live", 1.0), ("/health/ready", 1.0)):
        assert registry.get_sample_value("memory_http_requests_total",
                                         {"method": "GET", "route": route, "status": "200"}) >= count, route
