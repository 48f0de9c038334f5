"""The SQLite library the service runs on (adapters/sqlite/driver.py) and the SQL written for it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.sqlite.driver import sqlite3

ADAPTER = Path(__file__).resolve().parents[2] / "adapters" / "sqlite"


def test_the_service_runs_a_sqlite_with_everything_its_schema_uses() -> None:
    conn = sqlite3.connect(":memory:")
    assert sqlite3.sqlite_version_info >= (3, 35)  # RETURNING
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(a, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO t VALUES ('running dogs')")
    assert conn.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH 'run'").fetchall()[0][0] == 1
    assert conn.execute("SELECT json_extract('{\"a\": 1}', '$.a')").fetchone()[0] == 1


@pytest.mark.parametrize("source", sorted(ADAPTER.glob("*.py")), ids=lambda path: path.name)
def test_no_statement_limits_by_a_bare_parameter(source: Path) -> None:
    # With STAT4 (the bundled SQLite) a bare ``LIMIT ?`` makes SQLite prepare the statement again
    # at every execution; ``LIMIT ?+0`` binds the same way without it (driver.py).
    bare = [line.strip() for line in source.read_text().splitlines() if re.search(r"LIMIT \?(?!\+0)", line)]
    assert bare == []


def test_a_limit_written_as_an_expression_limits_as_the_parameter_would() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE n (v INTEGER)")
    conn.executemany("INSERT INTO n VALUES (?)", [(i,) for i in range(10)])
    for limit in (0, 1, 3, 10, 20):
        got = conn.execute("SELECT v FROM n ORDER BY v LIMIT ?+0 OFFSET ?", (limit, 2)).fetchall()
        assert got == conn.execute("SELECT v FROM n ORDER BY v LIMIT ? OFFSET ?", (limit, 2)).fetchall()
