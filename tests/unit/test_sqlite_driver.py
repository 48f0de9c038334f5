"""The SQLite library the service runs on (adapters/sqlite/driver.py) and the SQL written for it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.sqlite.driver import sqlite3


ROOT = Path(__file__).resolve().parents[2]
SQL_SOURCES = [*sorted((ROOT / "adapters" / "sqlite").glob("*.py")), ROOT / "bench" / "ceiling.py"]


def test_the_service_runs_a_sqlite_with_everything_its_schema_uses() -> None:
    conn = sqlite3.connect(":memory:")
    assert sqlite3.sqlite_version_info >= (3, 35)  # RETURNING
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(a, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO t VALUES ('running dogs')")
    assert conn.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH 'run'").fetchall()[0][0] == 1
    assert conn.execute("SELECT json_extract('{\"a\": 1}', '$.a')").fetchone()[0] == 1


@pytest.mark.parametrize("source", SQL_SOURCES, ids=lambda path: path.name)
def test_no_statement_limits_by_a_bare_parameter(source: Path) -> None:
    # With STAT4 (the bundled SQLite) a bare ``LIMIT ?`` makes SQLite prepare the statement again
    # at every execution; ``LIMIT ?+0`` binds the same way without it (driver.py). Bench/ceiling.py
    # runs the service's read SQL as written.
    text = re.sub(r"\s+", " ", source.read_text())  # SQL split over lines or string pieces
    assert re.findall(r"limit\s*[\"']?\s*[\"']?\s*(?:\?(?!\+0)|:\w)", text, re.IGNORECASE) == []


def test_forgotten_text_is_overwritten_not_left_in_free_pages(tmp_path: Path) -> None:
    from adapters.sqlite.connection import _configure

    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    _configure(conn, writer=True)
    assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("INSERT INTO t VALUES (?)", ("a secret worth forgetting " * 200,))
    conn.execute("DELETE FROM t")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert b"secret worth forgetting" not in (tmp_path / "s.db").read_bytes()


def test_a_limit_written_as_an_expression_limits_as_the_parameter_would() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE n (v INTEGER)")
    conn.executemany("INSERT INTO n VALUES (?)", [(i,) for i in range(10)])
    for limit in (0, 1, 3, 10, 20):
        got = conn.execute("SELECT v FROM n ORDER BY v LIMIT ?+0 OFFSET ?", (limit, 2)).fetchall()
        assert got == conn.execute("SELECT v FROM n ORDER BY v LIMIT ? OFFSET ?", (limit, 2)).fetchall()
