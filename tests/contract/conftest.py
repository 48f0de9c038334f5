"""Memory store fixtures: the same contract suite runs over every store adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.memory.store import InMemoryMemoryStore
from adapters.sqlite.store import SqliteMemoryStore
from ports.store import Store


def _open_store(kind: str, tmp_path: Path) -> Store:
    if kind == "memory":
        return InMemoryMemoryStore()
    return SqliteMemoryStore.open(str(tmp_path / "memory.db"))


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every store adapter in turn, empty, closed after the test."""
    opened = _open_store(request.param, tmp_path)
    yield opened
    await opened.close()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> str:
    return str(tmp_path / "memory.db")


@pytest.fixture
async def sqlite_store(sqlite_path: str) -> AsyncIterator[SqliteMemoryStore]:
    """The SQLite adapter alone, for what only a real database file has (WAL, FTS5, the writer)."""
    opened = SqliteMemoryStore.open(sqlite_path)
    yield opened
    await opened.close()
