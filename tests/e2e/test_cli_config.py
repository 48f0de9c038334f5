"""The CLI reads the server's configuration: the environment, then ``.env``, and without
SQLITE_PATH the database ``make run`` serves (./data/memory.db). Long commands draw a progress bar
on stderr; ``backup`` and ``export`` create the folders they write into."""

from __future__ import annotations

import json

import httpx
import pytest

from adapters.sqlite.driver import sqlite3
from tests.support.process import wait_for_backlog
from tests.support.server import ServiceProcess, run_service, service_env

# SQLite only under TEST_STORE=postgres: how the CLI finds the SQLite file `make run` serves.
pytestmark = pytest.mark.sqlite_only


def _serve_like_make_run(tmp_path, workdir):
    """A server started as `make run` does: SQLITE_PATH=./data/memory.db, relative to its folder."""
    (workdir / "data").mkdir(parents=True)
    env = service_env("./data/memory.db")
    with ServiceProcess(env, cwd=workdir, log_dir=tmp_path) as server, httpx.Client(base_url=server.url) as http:
        session = http.post("/sessions", json={"externalId": "cli"}).json()["id"]
        for n in range(3):
            http.post("/episodes", json={"sessionId": session, "userMessage": f"note {n}", "aiResponse": "ok"})
        wait_for_backlog(server.url, pending=0)


def test_maintenance_commands_use_make_runs_database_when_sqlite_path_is_unset(tmp_path):
    workdir = tmp_path / "checkout"
    _serve_like_make_run(tmp_path, workdir)
    cli_env = service_env(None)  # the same embedder settings, no SQLITE_PATH

    stats = run_service(["stats"], cli_env, cwd=workdir)
    assert stats.returncode == 0, stats.stderr
    figures = json.loads(stats.stdout)
    assert figures["rows"]["episodes"] == 3 and figures["vectors"]["episodes"] == 3

    doctor = run_service(["doctor"], cli_env, cwd=workdir)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "store: sqlite ./data/memory.db" in doctor.stdout

    backup = run_service(["backup", "./backups/2025/01/memory.db"], cli_env, cwd=workdir)
    assert backup.returncode == 0, backup.stderr
    with sqlite3.connect(workdir / "backups" / "2025" / "01" / "memory.db") as copy:
        assert copy.execute("SELECT count(*) FROM episodes").fetchone()[0] == 3

    reindex = run_service(["reindex"], cli_env, cwd=workdir)
    assert reindex.returncode == 0, reindex.stderr
    assert "episodes: done" in reindex.stderr and "reindexed: episodes=3" in reindex.stdout  # progress on stderr


def test_export_and_import_show_progress_and_import_reads_the_store_from_dotenv(tmp_path):
    workdir = tmp_path / "checkout"
    _serve_like_make_run(tmp_path, workdir)
    cli_env = service_env(None)

    export = run_service(["export", "exports/all.jsonl"], cli_env, cwd=workdir)
    assert export.returncode == 0, export.stderr
    assert "exporting" in export.stderr and "━" in export.stderr
    assert "episodes=3" in export.stdout

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".env").write_text("SQLITE_PATH=./restored.db\n")
    imported = run_service(["import", str(workdir / "exports" / "all.jsonl")], cli_env, cwd=elsewhere)
    assert imported.returncode == 0, imported.stderr
    assert "importing" in imported.stderr and "episodes=3" in imported.stdout
    with sqlite3.connect(elsewhere / "restored.db") as restored:
        assert restored.execute("SELECT count(*) FROM episodes").fetchone()[0] == 3


def test_without_sqlite_path_or_a_database_the_cli_says_where_it_looked(tmp_path):
    for command in (["stats"], ["doctor"], ["backup", "x.db"], ["export", "x.jsonl"]):
        done = run_service(command, service_env(None), cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert "SQLITE_PATH: no database at ./data/memory.db" in done.stderr
        assert not (tmp_path / "data").exists()  # it looked; it created nothing
