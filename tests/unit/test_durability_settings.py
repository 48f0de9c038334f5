"""Acknowledged writes survive power loss by default: the writer fsyncs the WAL at every commit
(``PRAGMA synchronous = FULL``); ``SQLITE_SYNCHRONOUS=normal`` is the documented trade (issue 11)."""

from __future__ import annotations

import asyncio

import pytest

from adapters.sqlite.store import SqliteStore
from app.config import ConfigError, load_settings

# PRAGMA synchronous answers a number: 1 = NORMAL, 2 = FULL.
LEVELS = {"normal": 1, "full": 2}


def _writer_level(store: SqliteStore) -> int:
    return asyncio.run(store.database.write(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0]))


def test_the_default_configuration_commits_with_full_sync(tmp_path):
    settings = load_settings({"SQLITE_PATH": str(tmp_path / "m.db")}, dotenv=None)
    assert settings.sqlite_synchronous == "full"
    store = SqliteStore.open(settings.sqlite_path)
    try:
        assert _writer_level(store) == LEVELS["full"]
    finally:
        asyncio.run(store.close())


@pytest.mark.parametrize("mode", ["normal", "FULL", " Normal "])
def test_sqlite_synchronous_selects_the_level(tmp_path, mode):
    settings = load_settings({"SQLITE_PATH": str(tmp_path / "m.db"), "SQLITE_SYNCHRONOUS": mode}, dotenv=None)
    store = SqliteStore.open(settings.sqlite_path, settings.sqlite_synchronous)
    try:
        assert _writer_level(store) == LEVELS[mode.strip().lower()]
    finally:
        asyncio.run(store.close())


@pytest.mark.parametrize("mode", ["off", "extra", "2"])
def test_an_unsafe_or_unknown_level_is_a_configuration_error(mode):
    with pytest.raises(ConfigError, match="SQLITE_SYNCHRONOUS"):
        load_settings({"SQLITE_PATH": "x.db", "SQLITE_SYNCHRONOUS": mode}, dotenv=None)


@pytest.mark.parametrize(("variable", "value"), [("MAX_IN_FLIGHT", "-1"), ("CORS_ORIGINS", "evil.example"),
                                                 ("EMBEDDING_MAX_ATTEMPTS", "0"), ("HEALTH_INTERVAL", "0")])
def test_the_new_hardening_settings_are_validated(variable, value):
    with pytest.raises(ConfigError, match=variable):
        load_settings({"SQLITE_PATH": "x.db", variable: value}, dotenv=None)
