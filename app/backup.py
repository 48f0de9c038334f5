"""Export, import and online backup of the SQLite store (``memory-service export|import|backup``).

Export writes JSON Lines: a header line, then one ``{"table", "row"}`` line per record of every
table a user's memory lives in (sessions, episodes, entities, relationships, summaries), with
each column's stored value as is (ids, timestamps and the metadata JSON text), so an import
reproduces the content exactly. The vector index is not exported: it is derived data, and an
import queues an embedding job for every episode, entity and summary it brings in.

Backup uses SQLite's online backup API, page by page, so it is safe while the server runs.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from adapters.sqlite.schema import SCHEMA_VERSION, migrate

FORMAT = "nexusai-memory-export"
FORMAT_VERSION = 1
# Parents before children, so foreign keys hold at every insert of an import.
TABLES = ("sessions", "episodes", "entities", "relationships", "summaries")
EMBEDDED = ("episodes", "entities", "summaries")  # tables whose rows have vectors
BACKUP_PAGES = 1024  # pages copied per step; the server's writer may run between steps


class BackupError(RuntimeError):
    """A clear, one-line reason an export, import or backup could not be done."""


@dataclass(frozen=True)
class Counts:
    rows: dict[str, int]
    queued: int = 0

    def describe(self) -> str:
        text = ", ".join(f"{table}={count}" for table, count in self.rows.items())
        return f"{text}; embedding jobs queued={self.queued}" if self.queued else text


def _open_read_only(db_path: str) -> sqlite3.Connection:
    if db_path == ":memory:" or not Path(db_path).exists():
        raise BackupError(f"SQLITE_PATH {db_path!r}: no database file to read")
    conn = sqlite3.connect(f"file:{Path(db_path).resolve()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def _rows(conn: sqlite3.Connection, table: str) -> Iterator[dict]:
    for row in conn.execute(f"SELECT * FROM {table} ORDER BY id"):  # table names are constants
        yield dict(row)


def export_store(db_path: str, target: str | Path) -> Counts:
    """Write every record of the store at ``db_path`` to ``target`` as JSON Lines.

    Reads one consistent snapshot (a single read transaction), so it is safe while serving."""
    counts = dict.fromkeys(TABLES, 0)
    conn = _open_read_only(db_path)
    try:
        conn.execute("BEGIN")  # one snapshot across all tables
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        with open(target, "w", encoding="utf-8", newline="\n") as out:
            out.write(json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "schemaVersion": version}) + "\n")
            for table in TABLES:
                for row in _rows(conn, table):
                    out.write(json.dumps({"table": table, "row": row}, ensure_ascii=False) + "\n")
                    counts[table] += 1
        conn.execute("COMMIT")
    finally:
        conn.close()
    return Counts(counts)


def _records(source: str | Path) -> Iterator[tuple[int, str, dict]]:
    with open(source, encoding="utf-8") as lines:
        header = _parse(lines.readline(), 1)
        if header.get("format") != FORMAT:
            raise BackupError(f"{source}: not a memory-service export (first line has no format {FORMAT!r})")
        if header.get("version") != FORMAT_VERSION:
            raise BackupError(f"{source}: export format version {header.get('version')!r} is not supported")
        for number, line in enumerate(lines, start=2):
            if not line.strip():
                continue
            record = _parse(line, number)
            table, row = record.get("table"), record.get("row")
            if table not in TABLES or not isinstance(row, dict):
                raise BackupError(f"line {number}: expected {{\"table\": one of {', '.join(TABLES)}, \"row\": {{...}}}}")
            yield number, table, row


def _parse(line: str, number: int) -> dict:
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise BackupError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BackupError(f"line {number}: expected a JSON object")
    return value


def import_store(db_path: str, source: str | Path) -> Counts:
    """Load an export into the store at ``db_path`` (created and migrated if missing), keeping
    every id, in one transaction: any bad line or clashing id imports nothing.

    Every imported episode, entity and summary gets an embedding job, so a running or next
    server fills the vector index."""
    if db_path == ":memory:":
        raise BackupError("SQLITE_PATH is :memory:; import needs a database file")
    Path(db_path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db_path, isolation_level=None)
    counts = dict.fromkeys(TABLES, 0)
    queued = 0
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("BEGIN IMMEDIATE")
        try:
            migrate(conn)
            columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in TABLES}
            for number, table, row in _records(source):
                unknown = set(row) - set(columns[table])
                if unknown or "id" not in row:
                    raise BackupError(f"line {number}: {table} row has unknown columns {sorted(unknown)} or no id")
                names = list(row)
                try:
                    conn.execute(
                        f"INSERT INTO {table}({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                        [row[n] for n in names],
                    )
                except sqlite3.IntegrityError as exc:
                    raise BackupError(f"line {number}: {table} id {row['id']}: {exc}") from None
                counts[table] += 1
                if table in EMBEDDED:
                    conn.execute(
                        "INSERT INTO embedding_outbox(collection, op, ref_id, next_attempt_at, created_at)"
                        " VALUES (?, 'upsert', ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),"
                        " strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                        (table, row["id"]),
                    )
                    queued += 1
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise BackupError(f"import into {db_path} failed: {exc}") from None
    finally:
        conn.close()
    return Counts(counts, queued)


def backup_store(db_path: str, target: str | Path) -> Counts:
    """Copy the live database to ``target`` with SQLite's online backup API (refuses to
    overwrite an existing file)."""
    target = Path(target)
    if target.exists():
        raise BackupError(f"{target} exists; choose a new file for the backup")
    source = _open_read_only(db_path)
    try:
        destination = sqlite3.connect(target)
        try:
            source.backup(destination, pages=BACKUP_PAGES)
            rows = {t: destination.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        finally:
            destination.close()
    except sqlite3.Error as exc:
        target.unlink(missing_ok=True)
        raise BackupError(f"backup of {db_path} to {target} failed: {exc}") from None
    finally:
        source.close()
    return Counts(rows)


__all__ = ["SCHEMA_VERSION", "BackupError", "Counts", "backup_store", "export_store", "import_store"]
