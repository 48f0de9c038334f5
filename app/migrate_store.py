"""``memory-service migrate-store``: copy a SQLite store into an empty PostgreSQL database.

Every record keeps its id (clients hold them), and so do history versions, change-feed seqs and
outbox jobs and API keys; each record's stored embedding and the index manifest come along (store id included),
so the vector index already built for the SQLite store is still this store's index, and nothing
needs embedding again. Issued API keys keep working, and keyed writes' stored answers still answer
their retries. The copy is one transaction: a failure leaves the target empty.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from adapters.postgres.store import PostgresStore
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.schema import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION

# Parents before children (foreign keys), the manifest's models before its generations.
TABLES = ("sessions", "episodes", "entities", "relationships", "summaries", "embedding_outbox", "index_meta",
          "index_models", "index_generations", "embeddings", "record_history", "change_events", "idempotency_keys",
          "api_keys")
_IDENTITY = {"record_history": "version", "change_events": "seq"}  # else "id", where the table has one
_BATCH = 1_000


class MigrationError(RuntimeError):
    """The source or the target is not fit for a copy (said in one line)."""


def _source(path: str) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise MigrationError(f"no SQLite store at {path}")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != SQLITE_SCHEMA_VERSION:
        conn.close()
        raise MigrationError(f"{path} has schema version {version}; open it once with this version of the"
                             f" service (which migrates it to {SQLITE_SCHEMA_VERSION}) before copying it")
    return conn


def _copy_table(source: sqlite3.Connection, target, table: str) -> int:
    kinds = {name: kind for name, kind, generated in target.execute(
        "SELECT column_name, data_type, is_generated FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s", (table,)).fetchall() if generated == "NEVER"}
    present = [row[1] for row in source.execute(f"PRAGMA table_info({table})")]
    columns = [c for c in present if c in kinds]
    derived: dict[str, Callable[[dict], object]] = {}
    if table == "entities":  # the casefolded name the PostgreSQL store searches by
        derived["name_folded"] = lambda row: row["name"].casefold()
    if table == "index_meta":  # this store's own manifest row replaces the one the target made
        target.execute("DELETE FROM index_meta")
    names = columns + list(derived)
    # SQLite keeps JSON as text and booleans as 0/1 integers.
    marks = ", ".join({"jsonb": "%s::jsonb", "boolean": "%s::int::boolean"}.get(kinds[c], "%s") for c in names)
    insert = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})"
    cursor = source.execute(f"SELECT {', '.join(columns)} FROM {table}")
    copied = 0
    with target.cursor() as out:
        while batch := cursor.fetchmany(_BATCH):
            rows = []
            for values in batch:
                row = dict(zip(columns, values))
                rows.append([*values, *(make(row) for make in derived.values())])
            out.executemany(insert, rows)
            copied += len(rows)
    key = _IDENTITY.get(table, "id")
    if key in kinds:  # new rows continue after the copied ids, never reuse one
        target.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{key}'),"
                       f" greatest((SELECT max({key}) FROM {table}), 1), (SELECT count(*) > 0 FROM {table}))")
    return copied


def migrate_store(sqlite_path: str, database_url: str, progress: Callable[[str, int], None] | None = None) -> dict[str, int]:
    """Copy the SQLite store at ``sqlite_path`` into the PostgreSQL database at ``database_url``
    (migrated first; it must hold no records). Returns the rows copied per table."""
    source = _source(sqlite_path)
    try:
        store = PostgresStore.open(database_url)
        try:
            def copy(conn) -> dict[str, int]:
                held = conn.execute("SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM entities)"
                                    " + (SELECT count(*) FROM change_events) + (SELECT count(*) FROM api_keys)"
                                    ).fetchone()[0]
                if held:
                    raise MigrationError("the target database already holds records; migrate into an empty one")
                copied = {}
                for table in TABLES:
                    copied[table] = _copy_table(source, conn, table)
                    if progress is not None:
                        progress(table, copied[table])
                return copied

            return store.database.write_sync(copy)
        finally:
            store.database.close()
    finally:
        source.close()
