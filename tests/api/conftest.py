from __future__ import annotations

import pytest
from litestar.testing import TestClient

from app.main import create_app


@pytest.fixture
def client(make_settings):
    """A Litestar test client over a real SQLite file, the in-memory index and the fake embedder."""
    with TestClient(create_app(make_settings())) as test_client:
        yield test_client


@pytest.fixture
def session_id(client) -> int:
    return client.post("/sessions", json={"externalId": "conv-1"}).json()["id"]
