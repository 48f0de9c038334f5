"""Fixtures shared by every test layer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.config import Settings

if TYPE_CHECKING:
    from tests.support.postgres import PostgresServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLE_PLUGIN = Path(__file__).resolve().parent.parent / "examples" / "ranker-plugin"


@pytest.fixture
def make_settings(tmp_path, request: pytest.FixtureRequest):
    """Settings for a throwaway service: a real SQLite file in tmp_path, the in-memory vector
    index and the fake embedder unless overridden. With ``TEST_STORE=postgres`` in the environment
    the store is a fresh PostgreSQL database instead (``.ci/run`` runs the API suite so once)."""

    def build(**overrides) -> Settings:
        values = dict(
            sqlite_path=str(tmp_path / "memory.db"), vector_index="memory", embedder="fake", embedding_dim=16,
            port=0, health_interval=0.05,
        )
        if os.environ.get("TEST_STORE") == "postgres":
            values.update(store="postgres", database_url=request.getfixturevalue("postgres_url"))
        values.update(overrides)
        return Settings(**values)

    return build


@pytest.fixture
def installed_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example plugin pip-installed into a throwaway directory put first on sys.path."""
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources it builds.
    source = shutil.copytree(EXAMPLE_PLUGIN, tmp_path / "source", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
            "--no-index", "--disable-pip-version-check", "--target", str(target), str(source),
        ],
        check=True,
        capture_output=True,
    )
    monkeypatch.syspath_prepend(str(target))
    # The module must come from the installed copy and must not outlive the test.
    monkeypatch.delitem(sys.modules, "nexusai_keyword_first", raising=False)
    yield target
    sys.modules.pop("nexusai_keyword_first", None)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator["PostgresServer"]:
    """A real PostgreSQL 15 for the session (or the one TEST_DATABASE_URL names); started only
    when a test asks for a PostgreSQL database. Fails, never skips, when it cannot start."""
    from tests.support.postgres import PostgresServer

    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server) -> Iterator[str]:
    """A fresh database of its own for one test, dropped after it."""
    url = postgres_server.new_database()
    yield url
    postgres_server.drop_database(url)
