"""``PostgresMaintenanceLock``: who maintains the vector index of a PostgreSQL store.

A session-level advisory lock, taken on a connection of its own that the holder keeps open: the
lock lasts as long as that session, so a holder that dies (``kill -9`` included) or loses the
server drops it, and another process takes the maintenance over. The connection's
``application_name`` carries the holder's pid, so any process can name the holder in messages.
"""

from __future__ import annotations

import asyncio
import logging
import os

import psycopg

from adapters.postgres.database import lock_key

log = logging.getLogger(__name__)

LOCK_NAME = "index-maintenance"
_APPLICATION = "nexus-memory maintenance pid "


class PostgresMaintenanceLock:
    def __init__(self, url: str, name: str = LOCK_NAME) -> None:
        self._url = url
        self._key = lock_key(name)
        self._conn: psycopg.Connection | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    async def try_acquire(self) -> bool:
        try:
            return await asyncio.to_thread(self._try_acquire)
        except psycopg.Error as exc:  # an unreachable server: not this process's turn, asked again later
            log.warning("the index maintenance lock cannot be taken: %s", exc)
            return False

    def _try_acquire(self) -> bool:
        if self._conn is not None:
            try:  # still ours only while its session lives (a server restart ends it)
                self._conn.execute("SELECT 1")
                return True
            except psycopg.Error:
                self._drop()
        conn = psycopg.connect(self._url, autocommit=True, application_name=f"{_APPLICATION}{os.getpid()}")
        try:
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()[0]
        except BaseException:
            conn.close()
            raise
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    async def holder(self) -> int | None:
        if self._conn is not None:
            return os.getpid()
        try:
            return await asyncio.to_thread(self._holder)
        except (psycopg.Error, ValueError):
            return None

    def _holder(self) -> int | None:
        # An advisory lock on one bigint key shows in pg_locks as classid (high half) and objid (low half).
        with psycopg.connect(self._url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid::bigint = %s"
                " AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (self._key,)).fetchone()
        name = row[0] if row else ""
        return int(name[len(_APPLICATION):]) if name.startswith(_APPLICATION) else None

    async def release(self) -> None:
        if self._conn is not None:
            await asyncio.to_thread(self._drop)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))  # at once, not when the server notices the close
        except psycopg.Error:
            pass  # the session is gone already, and its lock with it
        conn.close()
