"""A real PostgreSQL server for the tests: ``initdb`` into a temporary directory, ``pg_ctl start``
on a free port (socket in that directory), one database per test made from an empty template.

When ``TEST_DATABASE_URL`` (or ``DATABASE_URL``) names a server already running (CI may start one),
that server is used instead and nothing is started. Missing PostgreSQL binaries FAIL the tests that
need them with the reason: a store suite silently skipped would prove nothing.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
_ADMIN_DB = "postgres"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(*argv: str) -> list[str]:
    """Run a server binary as the ``postgres`` user when we are root (it refuses to run as root)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return list(argv)


class PostgresServer:
    """A throwaway server (or one given by URL) handing out fresh databases."""

    def __init__(self) -> None:
        self._given = os.environ.get("TEST_DATABASE_URL") or (
            os.environ.get("DATABASE_URL") if (os.environ.get("DATABASE_URL") or "").startswith("postgres") else None)
        self._dir: Path | None = None
        self._names = itertools.count()
        self.base_url = self._given or ""

    def start(self) -> "PostgresServer":
        if self._given:
            return self
        initdb = PG_BIN / "initdb"
        if not initdb.exists():
            raise RuntimeError(f"PostgreSQL 15 is not installed ({initdb} is missing): install postgresql-15"
                               " (.ci/run does) or set TEST_DATABASE_URL to a running server")
        self._dir = Path(tempfile.mkdtemp(prefix="nexus-pg-"))
        data, port = self._dir / "data", _free_port()
        if os.geteuid() == 0:
            shutil.chown(self._dir, "postgres", "postgres")
        subprocess.run(_as_postgres(str(initdb), "-D", str(data), "-U", "postgres", "--auth=trust",
                                    "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"),
                       check=True, capture_output=True)
        options = f"-p {port} -k {self._dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
        subprocess.run(_as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(self._dir / "log"),
                                    "-o", options, "-w", "start"), check=True, capture_output=True)
        self.base_url = f"postgresql://postgres@127.0.0.1:{port}/{_ADMIN_DB}"
        return self

    def _url(self, database: str) -> str:
        head, _, _ = self.base_url.rpartition("/")
        return f"{head}/{database}"

    def new_database(self) -> str:
        """A fresh empty database's URL."""
        name = f"t_{os.getpid()}_{next(self._names)}_{uuid.uuid4().hex[:6]}"
        with psycopg.connect(self.base_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self._url(name)

    def drop_database(self, url: str) -> None:
        name = url.rpartition("/")[2]
        with psycopg.connect(self.base_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self._dir is None:
            return
        subprocess.run(_as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self._dir / "data"), "-m", "immediate",
                                    "stop"), capture_output=True)
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None
