"""Store fixtures: each port's contract suite runs over every adapter set (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.memory.store import MemoryStore
from adapters.postgres.store import PostgresStore
from adapters.sqlite.store import SqliteStore
from ports.store import Store


STORE_KINDS = ["memory", "sqlite", "postgres"]


def open_store(kind: str, request: pytest.FixtureRequest, event_retention: int | None = None) -> Store:
    """An empty store of ``kind``: memory, SQLite in the test's tmp_path, or PostgreSQL in a fresh
    database of the session's server (started only when a test asks for one)."""
    keep = {} if event_retention is None else {"event_retention": event_retention}
    if kind == "memory":
        return MemoryStore(**keep)
    if kind == "postgres":
        return PostgresStore.open(request.getfixturevalue("postgres_url"), **keep)
    return SqliteStore.open(str(request.getfixturevalue("tmp_path") / "memory.db"), **keep)


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """Every adapter set in turn, empty, closed after the test."""
    opened = open_store(request.param, request)
    yield opened
    await opened.operations.close()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> str:
    return str(tmp_path / "memory.db")


@pytest.fixture
async def sqlite_store(sqlite_path: str) -> AsyncIterator[SqliteStore]:
    """The SQLite adapter alone, for what only a real database file has (WAL, FTS5, the writer)."""
    opened = SqliteStore.open(sqlite_path)
    yield opened
    await opened.operations.close()
