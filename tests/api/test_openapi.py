"""The OpenAPI document lists every route with its documented error responses."""

from __future__ import annotations

import pytest

from app.schemas import ErrorBody

# (method, path template as OpenAPI spells it) -> the error statuses a caller must be told about
DOCUMENTED = {
    ("get", "/episodes/{episode_id}/history"): {400, 401, 404},
    ("get", "/entities/{entity_id}/history"): {400, 401, 404},
    ("get", "/relationships/{relationship_id}/history"): {400, 401, 404},
    ("get", "/summaries/{summary_id}/history"): {400, 401, 404},
    ("get", "/events"): {400, 401},
    ("post", "/sessions"): {400, 401, 409, 413},
    ("get", "/sessions"): {400, 401},
    ("get", "/sessions/{session_id}"): {400, 401, 404},
    ("patch", "/sessions/{session_id}"): {400, 401, 404, 413},
    ("delete", "/sessions/{session_id}"): {400, 401, 404},
    ("get", "/sessions/by-external/{external_id}"): {400, 401, 404},
    ("get", "/sessions/by-external"): {400, 401, 404},
    ("delete", "/users/{user_id}"): {400, 401},
    ("get", "/sessions/{session_id}/episodes"): {400, 401, 404},
    ("get", "/sessions/{session_id}/summaries"): {400, 401, 404},
    ("post", "/episodes"): {400, 401, 404, 413},
    ("post", "/episodes/batch"): {400, 401, 404, 413},
    ("get", "/episodes/search"): {400, 401, 404},
    ("get", "/episodes/{episode_id}"): {400, 401, 404},
    ("patch", "/episodes/{episode_id}"): {400, 401, 404, 413},
    ("delete", "/episodes/{episode_id}"): {400, 401, 404},
    ("post", "/entities"): {400, 401, 413},
    ("get", "/entities"): {400, 401},
    ("patch", "/entities/{entity_id}"): {400, 401, 404, 409, 413},
    ("get", "/relationships"): {400, 401},
    ("get", "/episodes"): {400, 401},
    ("get", "/summaries"): {400, 401},
    ("patch", "/summaries/{summary_id}"): {400, 401, 404, 413},
    ("get", "/entities/by-type/{entity_type}"): {400, 401},
    ("get", "/entities/search"): {400, 401},
    ("get", "/entities/{entity_id}"): {400, 401, 404},
    ("delete", "/entities/{entity_id}"): {400, 401, 404},
    ("get", "/entities/{entity_id}/relationships"): {400, 401, 404},
    ("post", "/relationships"): {400, 401, 404, 413},
    ("delete", "/relationships"): {400, 401, 404},
    ("post", "/summaries"): {400, 401, 404, 413},
    ("get", "/summaries/{summary_id}"): {400, 401, 404},
    ("delete", "/summaries/{summary_id}"): {400, 401, 404},
    ("post", "/search"): {400, 401, 404, 413},
    ("post", "/context"): {400, 401, 404, 413},
    ("get", "/rankers"): {401},
    ("get", "/metrics"): {401},
    ("post", "/admin/keys"): {400, 401, 403, 413},
    ("get", "/admin/keys"): {401, 403},
    ("delete", "/admin/keys/{key_id}"): {400, 401, 403, 404},
    ("get", "/health"): set(),
    ("get", "/health/live"): set(),
    ("get", "/health/ready"): set(),
}


@pytest.fixture
def spec(client) -> dict:
    response = client.get("/schema/openapi.json")
    assert response.status_code == 200
    return response.json()


def _operations(spec: dict) -> dict[tuple[str, str], dict]:
    return {(method, path): op for path, ops in spec["paths"].items() for method, op in ops.items()}


def test_every_route_of_the_app_is_in_the_schema(client, spec):
    routed = {
        (method.lower(), route.path_format)
        for route in client.app.routes
        for method in getattr(route, "methods", ())
        if method not in ("HEAD", "OPTIONS") and not route.path_format.startswith("/schema")
    }
    assert routed == set(_operations(spec))
    assert routed == set(DOCUMENTED)


@pytest.mark.parametrize(("method", "path"), sorted(DOCUMENTED))
def test_each_route_documents_its_summary_and_error_responses(spec, method, path):
    operation = _operations(spec)[(method, path)]
    assert operation.get("summary")
    documented = {int(code) for code in operation["responses"] if int(code) >= 400}
    assert documented >= DOCUMENTED[(method, path)]


def test_error_responses_share_one_shape_with_an_example(spec):
    for (method, path), operation in _operations(spec).items():
        for code, response in operation["responses"].items():
            if int(code) < 400:
                continue
            content = response["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, code)
            assert content["examples"], (method, path, code)
    assert set(spec["components"]["schemas"]["ErrorBody"]["properties"]) == set(ErrorBody.__struct_encode_fields__)


def test_the_docs_ui_is_served_at_schema(client):
    assert client.get("/schema/swagger").status_code == 200
    page = client.get("/schema")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
