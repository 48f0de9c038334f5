"""PostgreSQL connections for the store: a pool of psycopg 3 connections used from threads.

The store's units of work are synchronous functions over a transaction (``ports.unit_of_work``),
so each unit and each read runs on a worker thread with a pooled connection of its own, inside one
transaction; the event loop only awaits it. Many service processes can share one database: every
piece of cross-process coordination goes through PostgreSQL itself (row locks, advisory locks,
LISTEN/NOTIFY), never through the processes.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.types.string import StrBinaryDumper, StrDumperUnknown
from psycopg_pool import ConnectionPool

from domain.errors import DomainError, Unavailable

T = TypeVar("T")
log = logging.getLogger(__name__)

POOL_SIZE = 8
CHANGES_CHANNEL = "nexus_memory_changes"  # NOTIFY channel: a unit wrote change events
LISTEN_POLL_SECONDS = 1.0  # how soon a listener sees ``close``


class Row(tuple):
    """A result row read by position or by column name, as ``sqlite3.Row`` is."""

    __slots__ = ()
    _names: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def row_factory(cursor: psycopg.Cursor) -> Callable[[Any], Row]:
    names = {column.name: n for n, column in enumerate(cursor.description or [])}
    typed = type("Row", (Row,), {"__slots__": (), "_names": names})
    return lambda values: typed(values)


class _NulSafeText(StrDumperUnknown):
    """PostgreSQL text cannot hold NUL (0x00), which clients may send in any string: it is stored
    as U+FFFD (the replacement character) instead of failing the write."""

    def dump(self, obj: str) -> bytes:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


class _NulSafeTextBinary(StrBinaryDumper):
    def dump(self, obj: str) -> bytes:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


def configure(conn: psycopg.Connection) -> None:
    """Per connection (never psycopg's global adapters): NUL-safe strings."""
    conn.adapters.register_dumper(str, _NulSafeText)
    conn.adapters.register_dumper(str, _NulSafeTextBinary)


def translate_error(exc: psycopg.Error) -> DomainError:
    """A storage failure as the domain's ``Unavailable`` (a clean 503, never a 500)."""
    if isinstance(exc, psycopg.errors.DiskFull):
        return Unavailable("the database disk is full; nothing was written")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return Unavailable("the database is read-only; nothing was written")
    if isinstance(exc, (psycopg.errors.LockNotAvailable, psycopg.errors.SerializationFailure,
                        psycopg.errors.DeadlockDetected)):
        return Unavailable("the database is busy; retry the request")
    if isinstance(exc, psycopg.OperationalError):
        return Unavailable("the database is unreachable; retry the request")
    return Unavailable("the database failed to complete the request")


def lock_key(name: str) -> int:
    """A stable 32-bit key for an advisory lock from the lock's name."""
    return zlib.crc32(f"nexus-memory:{name}".encode())


class PostgresDatabase:
    """One PostgreSQL database reached through a pool; ``read``/``write`` run a function of a
    connection in one transaction on a worker thread."""

    def __init__(self, url: str, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=False,
                                    kwargs={"row_factory": row_factory, "autocommit": False}, configure=configure,
                                    name="nexus-memory")
        try:
            self._pool.open(wait=True, timeout=30)
        except Exception as exc:
            self._pool.close()
            raise Unavailable(f"cannot connect to PostgreSQL at DATABASE_URL: {exc}") from None
        self._closed = False

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection]:
        if self._closed:
            raise Unavailable("the database is closed")
        try:
            # An explicit transaction block, so a room's own ``conn.transaction()`` is a savepoint
            # inside it (not a transaction of its own, committed before the unit ends).
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except DomainError:
            raise
        except psycopg.Error as exc:
            log.warning("database operation failed: %s", exc)
            raise translate_error(exc) from exc

    def write_sync(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run ``fn`` in one committed transaction (blocking: start-up, tools, worker threads)."""
        with self._transaction() as conn:
            return fn(conn)

    read_sync = write_sync

    async def write(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run ``fn`` in one transaction on a worker thread; returns after COMMIT."""
        return await asyncio.to_thread(self.write_sync, fn)

    async def read(self, fn: Callable[[psycopg.Connection], T]) -> T:
        return await asyncio.to_thread(self.read_sync, fn)

    # -- coordination between service processes -------------------------------------------------
    def listen(self, channel: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on a thread of its own) at each ``NOTIFY channel`` any process sends,
        and after each (re)connection, when one may have been missed; until ``close``."""
        def wake() -> None:
            try:
                callback()
            except Exception as exc:  # e.g. the loop it wakes has closed before the store: the listener lives on
                log.debug("a change listener failed: %s", exc)

        def run() -> None:
            while not self._closed:
                try:
                    with psycopg.connect(self.url, autocommit=True) as conn:
                        conn.execute(f"LISTEN {channel}")
                        wake()
                        while not self._closed:
                            for _ in conn.notifies(timeout=LISTEN_POLL_SECONDS):
                                wake()
                except psycopg.Error as exc:
                    log.warning("listening for %s failed (%s); listening again", channel, exc)
                    time.sleep(LISTEN_POLL_SECONDS)

        threading.Thread(target=run, name=f"pg-listen-{channel}", daemon=True).start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()
