"""Store fixtures: each port's contract suite runs over every adapter set (memory, SQLite)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.memory.store import MemoryStore
from adapters.sqlite.store import SqliteStore
from ports.store import Store


def _open_store(kind: str, tmp_path: Path) -> Store:
    if kind == "memory":
        return MemoryStore()
    return SqliteStore.open(str(tmp_path / "memory.db"))


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every adapter set in turn, empty, closed after the test."""
    opened = _open_store(request.param, tmp_path)
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
