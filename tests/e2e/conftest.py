"""Fixtures for tests that run the real service in a subprocess (see tests/support/server.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import STORE_DATABASE_VARIABLE, ServiceProcess, service_env

E2E_DIR = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/e2e starts processes: mark it so `-m "not e2e"` skips the lot.
    for item in items:
        if E2E_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def e2e_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``TEST_STORE=postgres`` every service a test starts runs on a fresh PostgreSQL database
    (``service_env`` reads it), except in tests about the SQLite file itself (``sqlite_only``)."""
    if os.environ.get("TEST_STORE") == "postgres" and request.node.get_closest_marker("sqlite_only") is None:
        monkeypatch.setenv(STORE_DATABASE_VARIABLE, request.getfixturevalue("postgres_url"))
    else:
        monkeypatch.delenv(STORE_DATABASE_VARIABLE, raising=False)


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def server_env(db_path) -> dict[str, str]:
    """A server on the embedded defaults: SQLite in tmp_path, Qdrant Edge beside it, the hash
    embedder at dimension 64; info logs so a failure's stderr shows the life cycle."""
    return service_env(db_path, {"EMBEDDER": "hash", "EMBEDDING_DIM": "64", "LOG_LEVEL": "info"})


@pytest.fixture
def server(server_env, tmp_path) -> Iterator[ServiceProcess]:
    """A started server; stopped at teardown whatever the test did to it."""
    process = ServiceProcess(server_env, log_dir=tmp_path)
    process.start()
    try:
        yield process
    finally:
        process.close()
