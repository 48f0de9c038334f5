"""Export, import and online backup of the SQLite store (``memory-service export|import|backup``).

Export writes JSON Lines: a header line, then one ``{"table", "row"}`` line per record of every
table a user's memory lives in (sessions, episodes, entities, relationships, summaries), with
each column's stored value as is (ids, timestamps and the metadata JSON text), so an import
reproduces the content exactly. The vector index is not exported: it is derived data, and an
import queues an embedding job for every episode, entity and summary it brings in.

Backup uses SQLite's online backup API, page by page, so it is safe while the server runs.

An import trusts nothing in its file: every row passes the API's own rules (types, lengths, id
ranges, a JSON object for metadata, timestamps by ``domain.models.to_utc``, rewritten in the
store's one format), unknown columns and unknown schema versions are refused, and one bad row
imports nothing. Exports and backups are created mode 0600, never overwrite a file and never
follow a symlink unless ``force`` is given (then the target is replaced, not written through).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec

from adapters.sqlite.database import create_private
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.schema import SCHEMA_VERSION, migrate
from adapters.sqlite.unit_of_work import SqliteTransaction
from app.schemas import Count, Id, Name, Text
from domain import writes
from domain.errors import Invalid
from domain.models import format_timestamp, parse_timestamp
from domain.services import MAX_NAME, check_metadata, check_text

FORMAT = "nexusai-memory-export"
FORMAT_VERSION = 1
# Parents before children, so foreign keys hold at every insert of an import.
TABLES = ("sessions", "episodes", "entities", "relationships", "summaries")
BACKUP_PAGES = 1024  # pages copied per step; the server's writer may run between steps


# Called as progress(done, total) while an export (rows) or an import (bytes read) runs.
Progress = Callable[[int, int], None]


def _no_progress(done: int, total: int) -> None:
    return None


class BackupError(RuntimeError):
    """A clear, one-line reason an export, import or backup could not be done."""


# -- what an imported row may hold: the API's rules, on the stored column names ---------------------
Stamp = Annotated[str, msgspec.Meta(max_length=64)]
MetaText = Annotated[str, msgspec.Meta(max_length=10_000_000)]


class _Row(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    id: Id
    metadata: MetaText = "{}"
    created_at: Stamp


class SessionRow(_Row, kw_only=True):
    external_id: Name
    updated_at: Stamp
    user_id: Name | None = None
    agent_id: Name | None = None


class EpisodeRow(_Row, kw_only=True):
    session_id: Id
    user_message: Text
    ai_response: Text
    token_count: Count | None = None
    user_id: Name | None = None
    agent_id: Name | None = None
    expires_at: Stamp | None = None


class EntityRow(_Row, kw_only=True):
    name: Name
    type: Name
    notes: Text | None = None
    updated_at: Stamp
    user_id: Name | None = None
    expires_at: Stamp | None = None


class RelationshipRow(_Row, kw_only=True):
    from_id: Id
    to_id: Id
    label: Name
    user_id: Name | None = None
    valid_from: Stamp | None = None
    valid_to: Stamp | None = None


class SummaryRow(_Row, kw_only=True):
    session_id: Id
    content: Text
    first_episode_id: Id | None = None
    last_episode_id: Id | None = None
    episode_count: Count = 0
    token_count: Count | None = None
    user_id: Name | None = None
    agent_id: Name | None = None
    expires_at: Stamp | None = None


ROW_TYPES: dict[str, type[_Row]] = {"sessions": SessionRow, "episodes": EpisodeRow, "entities": EntityRow,
                                    "relationships": RelationshipRow, "summaries": SummaryRow}
_STAMPS = ("created_at", "updated_at", "expires_at", "valid_from", "valid_to")
# The services' text rules per column (wire name, longest, may be empty): no NUL, names not blank.
_TEXTS = {"external_id": ("externalId", MAX_NAME, False), "name": ("name", MAX_NAME, False),
          "type": ("type", MAX_NAME, False), "label": ("label", MAX_NAME, False),
          "user_message": ("userMessage", 100_000, True), "ai_response": ("aiResponse", 100_000, True),
          "notes": ("notes", 100_000, True), "content": ("content", 100_000, False)}


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: json.loads takes them, the API does not


def _check_texts(table: str, values: dict[str, Any]) -> None:
    for column, (field, maximum, allow_empty) in _TEXTS.items():
        if isinstance(values.get(column), str):
            try:
                check_text(values[column], field, maximum=maximum, allow_empty=allow_empty)
            except Invalid as exc:
                raise BackupError(f"{column}: {exc.message}") from None
    if table == "episodes" and not (values["user_message"].strip() or values["ai_response"].strip()):
        raise BackupError("user_message: userMessage and aiResponse must not both be empty")


def validated_row(table: str, row: dict[str, Any], number: int) -> dict[str, Any]:
    """``row`` checked by the API's rules and normalised (canonical timestamps), or ``BackupError``."""
    try:
        checked = msgspec.convert(row, ROW_TYPES[table], strict=True)
    except msgspec.ValidationError as exc:
        raise BackupError(f"line {number}: {table} row: {exc}") from None
    values = msgspec.structs.asdict(checked)
    try:
        _check_texts(table, values)
    except BackupError as exc:
        raise BackupError(f"line {number}: {table} row {values['id']}: {exc}") from None
    try:
        metadata = json.loads(values["metadata"], parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        metadata = None
    if not isinstance(metadata, dict):
        raise BackupError(f"line {number}: {table} row {values['id']}: metadata must be a JSON object")
    try:
        check_metadata(metadata)
    except Invalid as exc:
        raise BackupError(f"line {number}: {table} row {values['id']}: {exc.message}") from None
    values["metadata"] = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
    for name in _STAMPS:
        if values.get(name) is not None:
            try:
                values[name] = format_timestamp(parse_timestamp(values[name]))
            except ValueError as exc:
                raise BackupError(f"line {number}: {table} row {values['id']}: {name}: {exc}") from None
    return values


def _write_private(target: str | Path, force: bool, write) -> None:
    """Write a new file at ``target`` (mode 0600) through ``write(file)``, whole or not at all.

    The data goes to a private temporary file beside the target first; it is then linked into
    place (refused when anything, a symlink included, is there) or, with ``force``, renamed over
    it: a symlink is replaced, never written through."""
    target = Path(target)
    if not force and (target.exists() or target.is_symlink()):
        raise BackupError(f"{target} exists; choose a new file or pass --force to replace it")
    handle, scratch = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        if force:
            os.replace(scratch, target)
        else:
            try:
                os.link(scratch, target)
            except FileExistsError:
                raise BackupError(f"{target} exists; choose a new file or pass --force to replace it") from None
            os.unlink(scratch)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


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


def export_store(db_path: str, target: str | Path, force: bool = False, progress: Progress = _no_progress) -> Counts:
    """Write every record of the store at ``db_path`` to ``target`` as JSON Lines (a new file,
    mode 0600, in a folder created if missing; ``force`` replaces an existing file).

    Reads one consistent snapshot (a single read transaction), so it is safe while serving."""
    counts = dict.fromkeys(TABLES, 0)
    conn = _open_read_only(db_path)
    try:
        conn.execute("BEGIN")  # one snapshot across all tables
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        total = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES)
        done = 0

        def write(out) -> None:
            nonlocal done
            out.write(json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "schemaVersion": version}) + "\n")
            for table in TABLES:
                for row in _rows(conn, table):
                    out.write(json.dumps({"table": table, "row": row}, ensure_ascii=False) + "\n")
                    counts[table] += 1
                    done += 1
                    progress(done, total)

        Path(target).parent.mkdir(parents=True, exist_ok=True)
        _write_private(target, force, write)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return Counts(counts)


def _records(source: str | Path, progress: Progress = _no_progress) -> Iterator[tuple[int, str, dict]]:
    total = Path(source).stat().st_size
    read = 0
    with open(source, encoding="utf-8") as lines:
        header = _parse(lines.readline(), 1)
        if header.get("format") != FORMAT:
            raise BackupError(f"{source}: not a memory-service export (first line has no format {FORMAT!r})")
        if header.get("version") != FORMAT_VERSION:
            raise BackupError(f"{source}: export format version {header.get('version')!r} is not supported")
        schema = header.get("schemaVersion")
        if type(schema) is not int or not 1 <= schema <= SCHEMA_VERSION:
            raise BackupError(f"{source}: schemaVersion {schema!r} is not one this service knows "
                              f"(1 to {SCHEMA_VERSION}); upgrade the service to import it")
        for number, line in enumerate(lines, start=2):
            read += len(line.encode("utf-8"))
            progress(read, total)
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
    except RecursionError:
        raise BackupError(f"line {number}: JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise BackupError(f"line {number}: expected a JSON object")
    return value


def import_store(db_path: str, source: str | Path, progress: Progress = _no_progress) -> Counts:
    """Load an export into the store at ``db_path`` (created and migrated if missing), keeping
    every id, in one transaction: any bad line or clashing id imports nothing.

    Every imported episode, entity and summary gets an embedding job, so a running or next
    server fills the vector index."""
    if db_path == ":memory:":
        raise BackupError("SQLITE_PATH is :memory:; import needs a database file")
    Path(db_path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    create_private(Path(db_path).expanduser())
    conn = sqlite3.connect(db_path, isolation_level=None)
    counts = dict.fromkeys(TABLES, 0)
    queued = 0
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("BEGIN IMMEDIATE")
        try:
            migrate(conn)
            tx = SqliteTransaction(conn)  # the import's one transaction, written through the domain's rules
            columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in TABLES}
            for number, table, raw in _records(source, progress):
                unknown = set(raw) - set(columns[table])
                if unknown or "id" not in raw:
                    raise BackupError(f"line {number}: {table} row has unknown columns {sorted(unknown)} or no id")
                row = validated_row(table, raw, number)
                names = list(row)
                try:
                    conn.execute(
                        f"INSERT INTO {table}({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                        [row[n] for n in names],
                    )
                except sqlite3.IntegrityError as exc:
                    raise BackupError(f"line {number}: {table} id {row['id']}: {exc}") from None
                counts[table] += 1
                queued += writes.records_imported(tx, table, [row["id"]])
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
    overwrite an existing file; creates its folder if missing)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        # Created here, private and exclusive: never an existing file, never through a symlink.
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        raise BackupError(f"{target} exists; choose a new file for the backup") from None
    try:
        source = _open_read_only(db_path)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
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
