"""The record-history migration on a database written by the version-3 schema: relationships keep their
rows and ids, get validity columns, and one open edge per triple is enforced; history and events
tables exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.sqlite.driver import sqlite3
from adapters.sqlite.schema import MIGRATIONS, SCHEMA_VERSION, migrate

NOW = "2025-03-01T12:00:00.000Z"


@pytest.fixture
def v3(tmp_path: Path) -> sqlite3.Connection:
    """A database at schema version 3, as an older service left it, with three entities and two
    edges, the newest edge deleted (so its id must not come back)."""
    conn = sqlite3.connect(tmp_path / "v3.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("BEGIN")
    for version in range(3):
        for statement in MIGRATIONS[version]:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
    for name in ("ada", "acme", "globex"):
        conn.execute("INSERT INTO entities(name, type, created_at, updated_at) VALUES (?, 'x', ?, ?)", (name, NOW, NOW))
    conn.execute("INSERT INTO relationships(from_id, to_id, label, metadata, created_at) VALUES (1, 2, 'works_at', '{\"a\":1}', ?)", (NOW,))
    gone = conn.execute("INSERT INTO relationships(from_id, to_id, label, created_at) VALUES (1, 3, 'knows', ?)", (NOW,)).lastrowid
    conn.execute("DELETE FROM relationships WHERE id = ?", (gone,))
    conn.execute("COMMIT")
    yield conn
    conn.close()


def _migrate(conn: sqlite3.Connection) -> int:
    conn.execute("BEGIN")
    found = migrate(conn)
    conn.execute("COMMIT")
    return found


def test_a_version_3_database_migrates_keeping_its_relationships(v3: sqlite3.Connection) -> None:
    assert _migrate(v3) == 3
    assert v3.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert v3.execute("SELECT id, from_id, to_id, label, metadata, created_at, valid_from, valid_to"
                      " FROM relationships").fetchall() == [(1, 1, 2, "works_at", '{"a":1}', NOW, None, None)]
    tables = {r[0] for r in v3.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"record_history", "change_events", "relationships"} <= tables
    assert "relationships_valid" not in tables


def test_a_deleted_edge_id_is_not_reused_after_the_migration(v3: sqlite3.Connection) -> None:
    _migrate(v3)
    new = v3.execute("INSERT INTO relationships(from_id, to_id, label, created_at) VALUES (2, 3, 'owns', ?)", (NOW,))
    assert new.lastrowid == 3  # 2 was the deleted edge: its history may still name it


def test_a_triple_has_one_open_edge_and_any_number_of_closed_ones(v3: sqlite3.Connection) -> None:
    _migrate(v3)
    insert = "INSERT INTO relationships(from_id, to_id, label, created_at, valid_to) VALUES (1, 2, 'works_at', ?, ?)"
    with pytest.raises(sqlite3.IntegrityError):
        v3.execute(insert, (NOW, None))
    v3.execute(insert, (NOW, "2024-01-01T00:00:00.000Z"))
    v3.execute(insert, (NOW, "2025-01-01T00:00:00.000Z"))
    assert v3.execute("SELECT count(*) FROM relationships WHERE from_id = 1 AND to_id = 2").fetchone()[0] == 3


def test_relationships_still_cascade_from_their_entities(v3: sqlite3.Connection) -> None:
    _migrate(v3)
    v3.execute("DELETE FROM entities WHERE id = 2")
    assert v3.execute("SELECT count(*) FROM relationships").fetchone()[0] == 0


def test_the_rebuild_keeps_columns_and_indexes_an_earlier_migration_added(v3: sqlite3.Connection) -> None:
    # The owners migration (version 4) runs before this one: a column and an index of its own.
    v3.execute("BEGIN")
    for statement in MIGRATIONS[3]:
        statement(v3) if callable(statement) else v3.execute(statement)
    v3.execute("PRAGMA user_version = 4")
    v3.execute("UPDATE relationships SET user_id = 'u1'")
    v3.execute("COMMIT")
    assert _migrate(v3) == 4
    assert v3.execute("SELECT id, user_id, valid_to FROM relationships").fetchall() == [(1, "u1", None)]
    indexes = {r[0] for r in v3.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'relationships'")}
    assert {"idx_relationships_user", "idx_relationships_to", "idx_relationships_open"} <= indexes
