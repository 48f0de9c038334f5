"""The SQLite schema and its migrations, on a bare connection (no store, no writer thread)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.sqlite.driver import sqlite3
from adapters.sqlite.schema import MIGRATIONS, SCHEMA_VERSION, migrate

NOW = "2025-03-01T12:00:00.000Z"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "schema.db", isolation_level=None)
    connection.execute("PRAGMA foreign_keys = ON")
    yield connection
    connection.close()


@pytest.fixture
def migrated(conn: sqlite3.Connection) -> sqlite3.Connection:
    conn.execute("BEGIN")
    migrate(conn)
    conn.execute("COMMIT")
    return conn


def names(conn: sqlite3.Connection, kind: str) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))}


def a_session(conn: sqlite3.Connection, external_id: str = "conv-1") -> int:
    return conn.execute(
        "INSERT INTO sessions(external_id, created_at, updated_at) VALUES (?, ?, ?)", (external_id, NOW, NOW)
    ).lastrowid


def an_entity(conn: sqlite3.Connection, name: str, type_: str = "person") -> int:
    return conn.execute(
        "INSERT INTO entities(name, type, created_at, updated_at) VALUES (?, ?, ?, ?)", (name, type_, NOW, NOW)
    ).lastrowid


def test_a_fresh_database_is_migrated_to_the_current_version(conn: sqlite3.Connection) -> None:
    # migrate() runs each statement with execute(), which refuses more than one statement: no
    # executescript and so no implicit COMMIT halfway through a version.
    conn.execute("BEGIN")
    assert migrate(conn) == 0
    conn.execute("COMMIT")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)


def test_migrating_an_up_to_date_database_changes_nothing(migrated: sqlite3.Connection) -> None:
    before = sorted(migrated.execute("SELECT type, name, sql FROM sqlite_master").fetchall(), key=str)
    assert migrate(migrated) == SCHEMA_VERSION
    assert sorted(migrated.execute("SELECT type, name, sql FROM sqlite_master").fetchall(), key=str) == before


def test_a_database_newer_than_the_code_is_refused(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="newer"):
        migrate(conn)
    assert "sessions" not in names(conn, "table")


def test_a_rolled_back_migration_leaves_no_trace(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN")
    migrate(conn)
    conn.execute("ROLLBACK")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert names(conn, "table") == set()


def test_the_schema_has_the_tables_indexes_and_fts_triggers(migrated: sqlite3.Connection) -> None:
    tables = names(migrated, "table")
    assert {"sessions", "episodes", "entities", "relationships", "summaries", "embedding_outbox"} <= tables
    assert {"episodes_fts", "summaries_fts", "entities_fts"} <= tables
    assert {"episodes_fts_insert", "episodes_fts_update", "episodes_fts_delete"} <= names(migrated, "trigger")
    assert {"idx_episodes_session_created", "idx_entities_type", "idx_outbox_due"} <= names(migrated, "index")
    columns = [r[2] for r in migrated.execute("PRAGMA index_info(idx_episodes_session_created)")]
    assert columns == ["session_id", "created_at", "id", "expires_at"]


def test_a_sessions_live_episodes_are_counted_and_paged_from_the_session_index(migrated: sqlite3.Connection) -> None:
    # The session page's count tests expires_at: with it in the index the count never reads a row.
    live = "session_id = ? AND (expires_at IS NULL OR expires_at > ?)"
    count = " ".join(r[3] for r in migrated.execute(f"EXPLAIN QUERY PLAN SELECT count(*) FROM episodes WHERE {live}",
                                                    (1, NOW)))
    assert "COVERING INDEX idx_episodes_session_created" in count
    page = " ".join(r[3] for r in migrated.execute(
        f"EXPLAIN QUERY PLAN SELECT * FROM episodes WHERE {live} ORDER BY created_at, id LIMIT 20", (1, NOW)))
    assert "idx_episodes_session_created" in page and "TEMP B-TREE" not in page


def test_the_session_index_migration_keeps_every_episode_and_its_order(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN")
    for version in range(SCHEMA_VERSION - 1):
        for statement in MIGRATIONS[version]:
            statement(conn) if callable(statement) else conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    session = a_session(conn)
    for n, expires in enumerate([None, "2025-01-01T00:00:00.000Z", "2030-01-01T00:00:00.000Z"]):
        conn.execute("INSERT INTO episodes(session_id, user_message, ai_response, created_at, expires_at)"
                     " VALUES (?, ?, 'a', ?, ?)", (session, f"u{n}", f"2025-0{n + 1}-01T00:00:00.000Z", expires))
    conn.execute("COMMIT")
    conn.execute("BEGIN")
    assert migrate(conn) == SCHEMA_VERSION - 1
    conn.execute("COMMIT")
    live = "session_id = ? AND (expires_at IS NULL OR expires_at > ?)"
    assert conn.execute(f"SELECT count(*) FROM episodes WHERE {live}", (session, NOW)).fetchone()[0] == 2
    assert [r[0] for r in conn.execute(f"SELECT user_message FROM episodes WHERE {live} ORDER BY created_at, id",
                                       (session, NOW))] == ["u0", "u2"]
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize(("table", "parent", "column"), [
    ("episodes", "sessions", "session_id"),
    ("summaries", "sessions", "session_id"),
    ("relationships", "entities", "from_id"),
    ("relationships", "entities", "to_id"),
])
def test_child_rows_cascade_from_their_parent(migrated: sqlite3.Connection, table: str, parent: str, column: str) -> None:
    keys = {(r["from"], r["table"], r["on_delete"]) for r in _rows(migrated, f"PRAGMA foreign_key_list({table})")}
    assert (column, parent, "CASCADE") in keys


def test_uniqueness_is_enforced_by_the_database(migrated: sqlite3.Connection) -> None:
    a_session(migrated, "conv-1")
    with pytest.raises(sqlite3.IntegrityError):
        a_session(migrated, "conv-1")
    ada = an_entity(migrated, "Ada")
    an_entity(migrated, "Ada", "ship")  # same name, another type
    with pytest.raises(sqlite3.IntegrityError):
        an_entity(migrated, "Ada")
    bob = an_entity(migrated, "Bob")
    edge = "INSERT INTO relationships(from_id, to_id, label, created_at) VALUES (?, ?, ?, ?)"
    migrated.execute(edge, (ada, bob, "knows", NOW))
    migrated.execute(edge, (bob, ada, "knows", NOW))
    with pytest.raises(sqlite3.IntegrityError):
        migrated.execute(edge, (ada, bob, "knows", NOW))


def test_an_episode_needs_an_existing_session(migrated: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.IntegrityError):
        migrated.execute(
            "INSERT INTO episodes(session_id, user_message, ai_response, created_at) VALUES (999, 'u', 'a', ?)", (NOW,)
        )


def test_the_triggers_keep_the_episode_index_in_step(migrated: sqlite3.Connection) -> None:
    def matching(query: str) -> list[int]:
        return [r[0] for r in migrated.execute("SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?", (query,))]

    session = a_session(migrated)
    episode = migrated.execute(
        "INSERT INTO episodes(session_id, user_message, ai_response, created_at) VALUES (?, 'penguins', 'swim', ?)",
        (session, NOW),
    ).lastrowid
    assert matching("penguins") == [episode]
    migrated.execute("UPDATE episodes SET user_message = 'giraffes' WHERE id = ?", (episode,))
    assert matching("penguins") == [] and matching("giraffes") == [episode]
    migrated.execute("UPDATE episodes SET metadata = '{\"x\":1}' WHERE id = ?", (episode,))
    migrated.execute("DELETE FROM sessions WHERE id = ?", (session,))  # the cascade fires the delete trigger
    assert matching("giraffes") == [] and matching("swim") == []
    migrated.execute("INSERT INTO episodes_fts(episodes_fts) VALUES('integrity-check')")


def test_ids_are_not_reused_after_the_newest_row_is_deleted(migrated: sqlite3.Connection) -> None:
    first = a_session(migrated, "a")
    migrated.execute("DELETE FROM sessions WHERE id = ?", (first,))
    assert a_session(migrated, "b") > first


def _rows(conn: sqlite3.Connection, sql: str) -> list[sqlite3.Row]:
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.row_factory = None


def _at_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute("BEGIN")
    for statements in MIGRATIONS[:version]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("COMMIT")


def test_a_version_3_database_keeps_its_records_ids_and_keyword_index_through_the_owners_migration(
    conn: sqlite3.Connection,
) -> None:
    _at_version(conn, 3)
    session = a_session(conn)
    conn.execute("INSERT INTO episodes(session_id, user_message, ai_response, created_at) VALUES (?, 'u', 'a', ?)",
                 (session, NOW))
    ada, bob = an_entity(conn, "Ada"), an_entity(conn, "Bob")
    gone = an_entity(conn, "Gone")
    conn.execute("DELETE FROM entities WHERE id = ?", (gone,))  # the highest id ever used is kept
    conn.execute("INSERT INTO relationships(from_id, to_id, label, created_at) VALUES (?, ?, 'knows', ?)",
                 (ada, bob, NOW))
    conn.execute("INSERT INTO embeddings(collection, ref_id, model_id, vector) VALUES ('entities', ?, 1, x'00')", (ada,))
    conn.execute("BEGIN")
    assert migrate(conn) == 3
    conn.execute("COMMIT")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert [r[:3] for r in conn.execute("SELECT id, name, user_id FROM entities ORDER BY id")] == [
        (ada, "Ada", None), (bob, "Bob", None)]
    assert conn.execute("SELECT from_id, to_id, label, user_id FROM relationships").fetchall() == [
        (ada, bob, "knows", None)]
    assert conn.execute("SELECT user_id, agent_id, expires_at FROM episodes").fetchall() == [(None, None, None)]
    assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 1  # nothing to re-embed
    # ... but the points get their owner/metadata payload: a rebuild from the stored embeddings
    assert conn.execute("SELECT value FROM index_meta WHERE key = 'reindex'").fetchone() == (
        "entities,episodes,summaries",)
    assert an_entity(conn, "Cy") > gone
    hits = conn.execute("SELECT rowid FROM entities_fts WHERE entities_fts MATCH 'ada'").fetchall()
    assert hits == [(ada,)]
    conn.execute("UPDATE entities SET notes = 'sailor' WHERE id = ?", (bob,))  # the triggers were put back
    assert conn.execute("SELECT rowid FROM entities_fts WHERE entities_fts MATCH 'sailor'").fetchall() == [(bob,)]
    assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 1
    conn.execute("DELETE FROM entities WHERE id = ?", (ada,))  # the cascade and the embedding trigger too
    assert conn.execute("SELECT count(*) FROM relationships").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 0
    conn.execute("INSERT INTO entities_fts(entities_fts) VALUES('integrity-check')")


def test_an_entity_is_unique_per_owner_and_no_owner_keeps_the_global_rule(migrated: sqlite3.Connection) -> None:
    insert = "INSERT INTO entities(name, type, user_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
    migrated.execute(insert, ("Ada", "person", "u1", NOW, NOW))
    migrated.execute(insert, ("Ada", "person", "u2", NOW, NOW))
    migrated.execute(insert, ("Ada", "person", None, NOW, NOW))
    for owner in ("u1", None):
        with pytest.raises(sqlite3.IntegrityError):
            migrated.execute(insert, ("Ada", "person", owner, NOW, NOW))


def test_each_owner_has_at_most_one_open_edge_of_a_triple(migrated: sqlite3.Connection) -> None:
    a, b = an_entity(migrated, "Lisbon", "city"), an_entity(migrated, "Porto", "city")
    insert = ("INSERT INTO relationships(from_id, to_id, label, created_at, user_id, valid_to) VALUES (?, ?, 'near', ?, ?, ?)")
    for owner in (None, "u1", "u2"):
        migrated.execute(insert, (a, b, NOW, owner, None))
    migrated.execute(insert, (a, b, NOW, "u1", NOW))  # a closed one beside the open one
    for owner in (None, "u1"):
        with pytest.raises(sqlite3.IntegrityError):
            migrated.execute(insert, (a, b, NOW, owner, None))
