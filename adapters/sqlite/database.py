"""SQLite connections that never block the event loop.

One writer thread owns the only write connection and group-commits: it takes every write waiting
in its queue, runs each in its own SAVEPOINT inside one transaction, commits once, makes the commit
durable (``connection.py``), and only then answers each caller. A
failing write rolls back to its savepoint and fails alone. Readers run on a small thread pool,
each thread with its own connection, so in WAL mode reads never wait behind writes. (The shape
follows datasette's ``database.py``, with group commit added.)
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from adapters.sqlite.connection import (  # noqa: F401  (SYNCHRONOUS, create_private: imported from here too)
    BUSY_TIMEOUT_MS, SYNCHRONOUS, WalSync, _configure, create_private, main_file)
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.errors import busy as _busy, translate_error
from adapters.sqlite.keyword_upkeep import KeywordUpkeep
from adapters.sqlite.short_reads import OverflowRates
from domain.errors import DomainError, Unavailable

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_GROUP = 512
READ_THREADS = 4
# A short read (``read_short``) runs on the event loop's own connection while it stays within this
# many SQLite VM steps (about 0.2-2 ms; a session page or a keyword search of a small store takes
# 1,500-2,500); a longer one is stopped there and run on a reader thread. The hop to a reader costs
# 50-100 us of CPU (queue, GIL hand-over, loop wake-up), more than most short reads themselves.
SHORT_READ_STEPS = 10_000
_STEP_TICK = 500  # the progress handler runs every this many VM steps


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll the open transaction back, if SQLite has not already."""
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _failed(batch: list, error: BaseException) -> list[tuple]:
    """The answer of every write in ``batch``: ``error``."""
    return [(future, loop, None, error) for _fn, future, loop in batch]


_STOP = object()  # queued by close: the writer and the readers stop at it


class SqliteDatabase:
    """A SQLite file (or a private in-memory database) with a group-committing writer thread."""

    def __init__(self, path: str, synchronous: str = "full") -> None:
        if synchronous not in SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {SYNCHRONOUS}, got {synchronous!r}")
        self.path = path
        self.synchronous = synchronous
        self._memory = path == ":memory:"
        self._uri = f"file:nexus-{uuid.uuid4().hex}?mode=memory&cache=shared" if self._memory else None
        if not self._memory:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            create_private(Path(path).expanduser())
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        # Guards "closed?" together with enqueueing: a write queued behind the stop marker would
        # never be answered, so after close every call fails at once instead of hanging.
        self._closing = threading.Lock()
        self._closed = False
        self._local = threading.local()
        # Reader threads take (fn, future, loop) from one queue and answer like the writer does:
        # a plain queue and call_soon_threadsafe cost less per read than run_in_executor.
        self._read_queue: queue.SimpleQueue = queue.SimpleQueue()
        self._readers: list[threading.Thread] = []
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_lock = threading.Lock()
        self._overflows = OverflowRates()  # which short reads mostly run over (they go to the pool)
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._wal_sync: WalSync | None = None
        self._refusing: Unavailable | None = None  # set once a commit could not be made durable
        self._writer = threading.Thread(target=self._write_loop, name="sqlite-writer", daemon=True)
        self._writer.start()
        self._started.wait()
        if self._start_error is not None:
            raise self._start_error
        if not self._memory:  # in-memory databases read on the writer
            self._readers = [threading.Thread(target=self._read_loop, name=f"sqlite-read_{n}", daemon=True)
                             for n in range(READ_THREADS)]
            for reader in self._readers:
                reader.start()

    def _connect(self, *, writer: bool, busy_timeout_ms: int = BUSY_TIMEOUT_MS, mapped: bool = False
                 ) -> sqlite3.Connection:
        if self._memory:
            conn = sqlite3.connect(self._uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        if _configure(conn, writer=writer, synchronous=self.synchronous, busy_timeout_ms=busy_timeout_ms,
                      sync_after_commit=writer, mapped=mapped):
            self._wal_sync = WalSync(main_file(conn))  # commits made durable after COMMIT (connection.py)
        if not writer:
            conn.execute("PRAGMA query_only = ON")
        return conn

    # -- writes --------------------------------------------------------------------------------
    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside a committed transaction on the writer thread; returns after COMMIT."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._submit((fn, future, loop))
        return await future

    def write_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """The blocking form of ``write``, for start-up and command-line tools."""
        done = threading.Event()
        box: dict[str, object] = {}

        def answer(result: object, error: BaseException | None) -> None:
            box["result"], box["error"] = result, error
            done.set()

        self._submit((fn, answer, None))
        done.wait()
        if box["error"] is not None:
            raise box["error"]  # type: ignore[misc]
        return box["result"]  # type: ignore[return-value]

    def _submit(self, item: tuple) -> None:
        with self._closing:
            if self._closed:
                raise Unavailable("the database is closed")
            self._queue.put(item)

    def _write_loop(self) -> None:
        try:
            conn = self._connect(writer=True)
        except BaseException as exc:  # surfaced to the constructor
            self._start_error = Unavailable(f"cannot open the database at {self.path}: {exc}")
            self._started.set()
            return
        self._conn = conn
        self._started.set()
        upkeep = KeywordUpkeep(conn)  # merges FTS5 segments once writes pause (keyword_upkeep.py)
        while True:
            try:
                item = self._queue.get(timeout=upkeep.wait())
            except queue.Empty:
                if self._refusing is None:
                    upkeep.step()
                continue
            if item is _STOP:
                break
            batch = [item]
            upkeep.written()
            if self._refusing is not None:  # nothing more is committed after a commit that is not durable
                self._gather(batch)
                for answer in _failed(batch, self._refusing):
                    self._answer(*answer)
                continue
            try:
                self._gather(batch)
                answers, committed = self._run_group(conn, batch)
                if committed and self._wal_sync is not None:  # durable before anyone is answered
                    try:
                        self.make_durable()
                    except Unavailable as error:
                        answers = _failed(batch, error)
                for answer in answers:
                    self._answer(*answer)
            except BaseException as exc:  # the writer thread must outlive any single failure
                log.exception("writer group failed")
                if conn.in_transaction:  # failed midway: SQLite's write lock must not stay held
                    _rollback(conn)
                for _fn, future, loop in batch:
                    self._answer(future, loop, None, Unavailable(f"write failed: {type(exc).__name__}"))
        conn.close()

    def _gather(self, batch: list) -> None:
        """Add the writes waiting in the queue to ``batch``, up to ``MAX_GROUP``."""
        while len(batch) < MAX_GROUP:
            try:
                nxt = self._queue.get_nowait()
            except queue.Empty:
                return
            if nxt is _STOP:
                self._queue.put(_STOP)
                return
            batch.append(nxt)

    def _run_group(self, conn: sqlite3.Connection, batch: list) -> tuple[list[tuple], bool]:
        """Run the group in one transaction: each caller's answer, and whether it committed."""
        outcomes: list[tuple[object, BaseException | None]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            error = translate_error(exc)
            return _failed(batch, error), False
        for fn, _future, _loop in batch:
            try:
                # Each caller's write is a savepoint of the group's transaction: one that fails is
                # undone alone and its neighbours still commit.
                conn.execute("SAVEPOINT caller_write")
                result = fn(conn)
                conn.execute("RELEASE caller_write")
                outcomes.append((result, None))
            except BaseException as exc:  # one bad write must not fail its neighbours
                if isinstance(exc, sqlite3.Error):
                    log.warning("write failed: %s", exc)
                    exc = translate_error(exc)
                if not self._undo_one(conn):
                    # SQLite rolled the whole transaction back (disk full, I/O error): nothing of
                    # this group is committed, so every caller in it gets the error.
                    error = exc if isinstance(exc, DomainError) else Unavailable("the write was rolled back")
                    return _failed(batch, error), False
                outcomes.append((None, exc))
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.error("commit failed: %s", exc)
            _rollback(conn)
            error = translate_error(exc)
            return _failed(batch, error), False
        return [(future, loop, result, error) for (_fn, future, loop), (result, error) in zip(batch, outcomes)], True

    def make_durable(self) -> None:
        """Make every commit so far durable (a no-op where SQLite's own FULL or NORMAL decides);
        after a failure, ``Unavailable``, and every later write is refused (``connection.py``)."""
        if self._refusing is not None:
            raise self._refusing
        if self._wal_sync is None:
            return
        try:
            self._wal_sync.sync()
        except OSError as exc:
            log.critical("a commit could not be made durable (%s): writes are refused until a restart", exc)
            self._refusing = Unavailable(f"the store's disk did not make a commit durable ({exc.strerror or exc});"
                                         " writes are refused until the service is restarted")
            raise self._refusing from exc

    @staticmethod
    def _undo_one(conn: sqlite3.Connection) -> bool:
        """Roll back the current write's savepoint; False when the transaction itself is gone."""
        if not conn.in_transaction:
            return False
        try:
            conn.execute("ROLLBACK TO caller_write")
            conn.execute("RELEASE caller_write")
            return True
        except sqlite3.Error:
            _rollback(conn)
            return False

    @staticmethod
    def _answer(future, loop, result, error) -> None:
        """Hand one caller its result or error: a future on the caller's event loop (``write``), or
        the callback of ``write_sync`` (no loop)."""
        if loop is None:
            future(result, error)
            return

        def resolve() -> None:
            if future.done():  # cancelled by its caller, or already answered
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        try:
            loop.call_soon_threadsafe(resolve)
        except RuntimeError:  # the loop is gone (shutdown); the write is committed regardless
            pass

    # -- reads ---------------------------------------------------------------------------------
    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a reader connection (in a thread); in-memory databases read on the writer."""
        if self._memory:
            return await self.write(fn)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._closing:
            if self._closed:
                raise Unavailable("the database is closed")
            self._read_queue.put((fn, future, loop))
        self._overflows.pooled += 1
        try:
            return await future
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc
        finally:
            self._overflows.pooled -= 1

    async def read_point(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` — a lookup of a few rows by key, nothing longer — on the event loop's thread,
        sparing the pool hop that costs more than such a read (WAL: no writer's lock is waited for;
        busy_timeout 0: a busy database sends the read to the pool)."""
        if self._memory:
            return await self.write(fn)
        if self._closed:
            raise Unavailable("the database is closed")
        try:
            return fn(self._connection(busy_timeout_ms=0, mapped=True))
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() and "busy" not in str(exc).lower():
                raise translate_error(exc) from exc
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc
        return await self.read(fn)

    async def read_short(self, fn: Callable[[sqlite3.Connection], T], steps: int = SHORT_READ_STEPS,
                         site: object = None) -> T:
        """Run ``fn`` — a usually short read — on the event loop's thread within ``steps`` SQLite VM
        steps, sparing the reader-thread hop; past that it is interrupted and run again on a reader
        thread, as ``read`` runs it (``fn`` must only read). ``OverflowRates`` sends it to the pool
        at once while other reads are there or when its code mostly overflows (``site``: its SQL)."""
        if self._memory:
            return await self.write(fn)
        if self._closed:
            raise Unavailable("the database is closed")
        site = site if site is not None else getattr(fn, "__code__", None)
        if not self._overflows.inline(site):
            return await self.read(fn)
        try:
            conn = self._connection(busy_timeout_ms=0, mapped=True)
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc
        ticks, limit, busy = 0, max(1, steps // _STEP_TICK), False

        def tick() -> int:
            nonlocal ticks
            ticks += 1
            return ticks >= limit  # non-zero: SQLite interrupts the statement running

        conn.set_progress_handler(tick, _STEP_TICK)
        try:
            result = fn(conn)
            if ticks < limit:  # fn may have swallowed an interrupt: then its answer is partial
                self._overflows.record(site, False)
                return result
        except BaseException as exc:
            busy = ticks < limit and isinstance(exc, sqlite3.OperationalError) and _busy(exc)  # pool, below
            if ticks < limit and not busy:
                if isinstance(exc, sqlite3.Error):
                    raise translate_error(exc) from exc
                raise
        finally:
            conn.set_progress_handler(None, 0)
        if not busy:
            self._overflows.record(site, True)
        return await self.read(fn)

    def _read_loop(self) -> None:
        while (item := self._read_queue.get()) is not _STOP:
            fn, future, loop = item
            try:
                result, error = fn(self._connection()), None
            except BaseException as exc:  # handed to the caller, never kills the reader
                result, error = None, exc
            self._answer(future, loop, result, error)

    def _connection(self, busy_timeout_ms: int = BUSY_TIMEOUT_MS, mapped: bool = False) -> sqlite3.Connection:
        """This thread's reader connection (opened on first use, closed by ``close``); the event
        loop's is ``mapped`` (``connection.MMAP_BYTES``)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(writer=False, busy_timeout_ms=busy_timeout_ms, mapped=mapped)
            self._local.conn = conn
            with self._reader_lock:
                self._reader_conns.append(conn)
        return conn

    def close(self) -> None:
        """Finish queued writes, then close every connection (idempotent)."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._writer.join()
        if self._wal_sync is not None:
            self._wal_sync.close()
        for _ in self._readers:
            self._read_queue.put(_STOP)
        for reader in self._readers:
            reader.join()
        with self._reader_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
