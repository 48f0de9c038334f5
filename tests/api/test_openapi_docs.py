"""The OpenAPI document declares the bearer scheme when a key is set and carries a valid example
for every request body (the offline docs page: tests/e2e/test_docs_offline.py)."""

from __future__ import annotations

import msgspec
import pytest
from litestar.testing import TestClient

from app.main import create_app
from app.routes.examples import EXAMPLES

KEY = "docs-key-0123456789"


@pytest.fixture
def keyed(make_settings):
    with TestClient(create_app(make_settings(memory_api_key=KEY))) as client:
        yield client


def _operations(spec: dict):
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def test_with_a_key_the_schema_declares_the_bearer_scheme_and_health_needs_none(keyed):
    spec = keyed.get("/schema/openapi.json").json()
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": "MEMORY_API_KEY, sent as 'Authorization: Bearer <key>'"}
    assert spec["security"] == [{"bearerAuth": []}]
    health = {"/health", "/health/live", "/health/ready"}
    assert all(spec["paths"][path]["get"]["security"] == [] for path in health)
    assert all("security" not in op for method, path, op in _operations(spec) if path not in health)


def test_without_a_key_the_schema_declares_no_security(client):
    spec = client.get("/schema/openapi.json").json()
    assert "security" not in spec and "securitySchemes" not in spec.get("components", {})


def test_every_request_body_has_an_example_that_its_body_type_accepts(client):
    spec = client.get("/schema/openapi.json").json()
    with_body = [(method, path, op) for method, path, op in _operations(spec) if "requestBody" in op]
    assert len(with_body) == len(EXAMPLES) == 14
    for method, path, operation in with_body:
        # Litestar puts a body's examples on its JSON Schema (OpenAPI 3.1), where Swagger UI reads them.
        examples = operation["requestBody"]["content"]["application/json"]["schema"]["examples"]
        assert len(examples) == 1 and examples[0] in EXAMPLES.values(), (method, path)
    for struct, example in EXAMPLES.items():
        msgspec.json.decode(msgspec.json.encode(example), type=struct)  # raises when an example is invalid
