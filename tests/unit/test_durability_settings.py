"""Acknowledged writes survive power loss by default: no caller is answered before its commit's
WAL frames have been fsynced (``SQLITE_SYNCHRONOUS=full``: the writer commits in WAL mode and
fdatasyncs the WAL after COMMIT has let the write lock go, ``adapters/sqlite/connection.py``);
``SQLITE_SYNCHRONOUS=normal`` is the documented trade. The power-cut test
(tests/e2e/test_power_loss.py) shows both on a real disk."""

from __future__ import annotations

import asyncio
import os

import pytest

from adapters.sqlite import connection
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.store import SqliteStore
from app.config import ConfigError, load_settings
from domain.errors import Unavailable

# PRAGMA synchronous answers a number: 1 = NORMAL, 2 = FULL.
LEVELS = {"normal": 1, "full": 2}


def _writer_level(store: SqliteStore) -> int:
    return asyncio.run(store.database.write(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0]))


def _watched(store: SqliteStore, monkeypatch, fail: OSError | None = None) -> list[tuple]:
    """What happens, in order: each fdatasync (which file, how many probe rows a fresh reader then
    sees) and each answer to a caller of the writer."""
    events: list[tuple] = []
    db_path = store.database.path
    real_sync, real_answer = connection._fdatasync, store.database._answer

    def fdatasync(fd: int) -> None:
        with sqlite3.connect(db_path) as reader:
            rows = reader.execute("SELECT count(*) FROM probe").fetchone()[0]
        events.append(("sync", os.readlink(f"/proc/self/fd/{fd}"), rows))
        if fail is not None:
            raise fail
        real_sync(fd)

    def answer(future, loop, result, error) -> None:
        events.append(("answer", error))
        real_answer(future, loop, result, error)

    monkeypatch.setattr(connection, "_fdatasync", fdatasync)
    monkeypatch.setattr(store.database, "_answer", answer)
    return events


def _insert(store: SqliteStore, n: int) -> None:
    asyncio.run(store.database.write(lambda conn: conn.execute("INSERT INTO probe VALUES (?)", (n,))))


def _store_with_probe(path, mode: str | None = None) -> SqliteStore:
    store = SqliteStore.open(str(path), mode) if mode else SqliteStore.open(str(path))
    asyncio.run(store.database.write(lambda conn: conn.execute("CREATE TABLE probe (n INTEGER)")))
    return store


def test_the_default_answers_a_write_only_after_its_commit_is_fsynced(tmp_path, monkeypatch):
    settings = load_settings({"SQLITE_PATH": str(tmp_path / "m.db")}, dotenv=None)
    assert settings.sqlite_synchronous == "full"
    store = _store_with_probe(settings.sqlite_path)
    try:
        events = _watched(store, monkeypatch)
        for n in range(3):
            _insert(store, n)
        # Each write: the WAL fsynced with the row already committed (a fresh reader sees it), then
        # the answer.
        assert events == [(kind, *rest) for n in range(3)
                          for kind, *rest in (("sync", f"{tmp_path / 'm.db'}-wal", n + 1), ("answer", None))]
    finally:
        asyncio.run(store.close())


def test_a_commit_that_cannot_be_made_durable_is_not_acknowledged(tmp_path, monkeypatch):
    store = _store_with_probe(tmp_path / "m.db")
    try:
        events = _watched(store, monkeypatch, fail=OSError(5, "Input/output error"))
        with pytest.raises(Unavailable, match="durable"):
            _insert(store, 1)
        assert [kind for kind, *_ in events] == ["sync", "answer"]
        # Its frames may never reach the disk, and a later commit after them could be lost with
        # them: nothing more is committed or acknowledged until a restart.
        with pytest.raises(Unavailable, match="restarted"):
            _insert(store, 2)
        assert [kind for kind, *_ in events] == ["sync", "answer", "answer"]
        with sqlite3.connect(store.database.path) as reader:
            assert reader.execute("SELECT n FROM probe").fetchall() == [(1,)]
    finally:
        asyncio.run(store.close())


def test_a_symlinked_path_fsyncs_the_wal_sqlite_writes(tmp_path, monkeypatch):
    # SQLite names the WAL after the symlink's target: that file is the one to fsync.
    (tmp_path / "real").mkdir()
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "m.db").symlink_to(tmp_path / "real" / "m.db")
    (tmp_path / "real" / "m.db").touch()
    store = _store_with_probe(tmp_path / "link" / "m.db")
    try:
        events = _watched(store, monkeypatch)
        _insert(store, 1)
        assert events == [("sync", f"{tmp_path / 'real' / 'm.db'}-wal", 1), ("answer", None)]
    finally:
        asyncio.run(store.close())


def test_the_change_feed_serves_only_what_is_durable(tmp_path, monkeypatch):
    from domain import writes

    store = _store_with_probe(tmp_path / "m.db")
    try:
        asyncio.run(store.uow.run(lambda tx: writes.create_session(tx, "s", {})))
        events = _watched(store, monkeypatch)
        served = asyncio.run(store.events.after(0, 10))
        assert [event.op for event in served] == ["created"]
        assert [kind for kind, *_ in events] == ["sync", "answer"]  # made durable before it is served
        assert asyncio.run(store.events.after(served[-1].seq, 10)) == []
        assert [kind for kind, *_ in events] == ["sync", "answer"]  # nothing served, nothing to sync
    finally:
        asyncio.run(store.close())


def test_normal_answers_without_an_fsync(tmp_path, monkeypatch):
    store = _store_with_probe(tmp_path / "m.db", "normal")
    try:
        events = _watched(store, monkeypatch)
        _insert(store, 1)
        assert events == [("answer", None)]
        assert _writer_level(store) == LEVELS["normal"]
    finally:
        asyncio.run(store.close())


@pytest.mark.parametrize(("mode", "level"), [("normal", "normal"), ("FULL", "normal"), (" Normal ", "normal")])
def test_sqlite_synchronous_selects_the_level(tmp_path, mode, level):
    # FULL commits at SQLite's NORMAL and fsyncs the WAL itself after the commit (the tests above).
    settings = load_settings({"SQLITE_PATH": str(tmp_path / "m.db"), "SQLITE_SYNCHRONOUS": mode}, dotenv=None)
    store = SqliteStore.open(settings.sqlite_path, settings.sqlite_synchronous)
    try:
        assert _writer_level(store) == LEVELS[level]
    finally:
        asyncio.run(store.close())


def test_a_database_without_a_wal_keeps_sqlites_own_full_sync():
    store = SqliteStore.open(":memory:")  # no WAL to fsync after the commit: SQLite's FULL stays
    try:
        assert _writer_level(store) == LEVELS["full"]
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
