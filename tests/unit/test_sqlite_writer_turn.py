"""Writers of one SQLite file in several processes take turns by a file lock (``WriterTurn``): held
for exactly a group-commit transaction, released after it, never waited on past the busy timeout."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import threading
import time

import pytest

from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.writer_turn import WriterTurn


def _turn_free(path: str) -> bool:
    fd = os.open(f"{path}.writer", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing the descriptor drops a lock taken through it
    return True


async def test_a_write_holds_the_turn_for_its_transaction_and_releases_it_after_commit(tmp_path):
    path = str(tmp_path / "m.db")
    db = SqliteDatabase(path)
    inside, go_on = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def create(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE t (x INTEGER)")

    def slow_write(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO t VALUES (1)")
        inside.set()
        go_on.wait(30)
        return 1

    try:
        await db.write(create)
        assert _freed(path)
        watcher = threading.Thread(target=lambda: (inside.wait(30), seen.update(during=_turn_free(path)), go_on.set()))
        watcher.start()
        assert await db.write(slow_write) == 1
        watcher.join(30)
        assert seen == {"during": False}  # another process could not write meanwhile
        assert _freed(path)  # and can once the commit is done
        assert oct(os.stat(f"{path}.writer").st_mode & 0o777) == oct(0o600 & ~_umask())
    finally:
        db.close()


def _freed(path: str) -> bool:
    """The writer answers its callers right after COMMIT and lets go of the turn a moment later."""
    deadline = time.monotonic() + 10
    while not _turn_free(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_turn_held_past_the_timeout_does_not_hang_the_writer(tmp_path):
    path = str(tmp_path / "m.db")
    sqlite3.connect(path).close()
    holder = os.open(f"{path}.writer", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)  # a stuck holder (it never releases)
    turn = WriterTurn(path, timeout=0.05)
    try:
        with turn:  # returns after the timeout without the turn: SQLite's own lock decides
            conn = sqlite3.connect(path)
            conn.execute("CREATE TABLE t (x INTEGER)")
            conn.close()
        assert not _turn_free(path)  # the holder still has it; the writer did not take or drop it
    finally:
        turn.close()
        os.close(holder)
    assert _turn_free(path)


def _until(check, limit_s: float = 10.0) -> bool:
    """Whether ``check()`` becomes true within ``limit_s`` (a bound on waiting, not a speed claim)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


def test_a_waiting_writer_is_handed_the_turn_when_it_is_released(tmp_path):
    path = str(tmp_path / "m.db")
    holder = os.open(f"{path}.writer", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    turn = WriterTurn(path, timeout=30)
    entered, held = threading.Event(), []

    def write() -> None:
        with turn:
            entered.set()
            held.append(not _turn_free(path))  # held, through the waiter's descriptor
            time.sleep(0.05)

    writer = threading.Thread(target=write)
    try:
        writer.start()
        assert not entered.wait(0.2)  # waiting: the turn is the holder's
        fcntl.flock(holder, fcntl.LOCK_UN)
        assert entered.wait(10)  # woken by the release, long before the 30 s bound
        writer.join(10)
        assert held == [True]
        assert _turn_free(path)  # and released after its transaction
    finally:
        turn.close()
        os.close(holder)


def test_a_turn_got_after_the_writer_stopped_waiting_is_let_go_or_handed_to_its_next_wait(tmp_path):
    path = str(tmp_path / "m.db")
    holder = os.open(f"{path}.writer", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    turn = WriterTurn(path, timeout=0.05)
    try:
        with turn:  # gives up waiting; the waiter stays blocked for it
            pass
        fcntl.flock(holder, fcntl.LOCK_UN)
        assert _until(lambda: _turn_free(path))  # the waiter got it for nobody and let it go
        fcntl.flock(holder, fcntl.LOCK_EX)
        with turn:  # gives up again
            pass
        turn._timeout = 30
        done, held = threading.Event(), []

        def write_again() -> None:
            with turn:  # the waiter's pending wait serves this one
                held.append(not _turn_free(path))
            done.set()

        again = threading.Thread(target=write_again)
        again.start()
        time.sleep(0.1)
        fcntl.flock(holder, fcntl.LOCK_UN)
        assert done.wait(10)
        again.join(10)
        assert held == [True]
        assert _turn_free(path)
    finally:
        turn.close()
        os.close(holder)


def _write_many(path: str, tag: int, count: int) -> None:
    import asyncio

    async def run() -> None:
        db = SqliteDatabase(path)
        try:
            for n in range(count):
                await db.write(lambda conn, n=n: conn.execute("INSERT INTO t VALUES (?, ?)", (tag, n)))
        finally:
            db.close()

    asyncio.run(run())


@pytest.mark.parametrize("processes", [3])
def test_writers_in_several_processes_all_commit_in_turn(tmp_path, processes):
    path = str(tmp_path / "m.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (tag INTEGER, n INTEGER)")
    conn.close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(path, tag, 200)) for tag in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    conn = sqlite3.connect(path)
    counts = dict(conn.execute("SELECT tag, count(DISTINCT n) FROM t GROUP BY tag").fetchall())
    conn.close()
    assert counts == {tag: 200 for tag in range(processes)}
    assert _turn_free(path)


async def test_a_file_system_without_flock_leaves_the_ordering_to_sqlite(tmp_path, monkeypatch, caplog):
    import errno

    import adapters.sqlite.writer_turn as writer_turn

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(writer_turn.fcntl, "flock", no_locks)
    db = SqliteDatabase(str(tmp_path / "m.db"))
    try:
        await db.write(lambda conn: conn.execute("CREATE TABLE t (x INTEGER)"))
        for n in range(3):
            await db.write(lambda conn, n=n: conn.execute("INSERT INTO t VALUES (?)", (n,)))
        assert await db.read(lambda conn: conn.execute("SELECT count(*) FROM t").fetchone()[0]) == 3
    finally:
        db.close()
    assert "writers take no turns" in caplog.text


def test_a_waiter_that_dies_lets_its_writer_go_on_and_is_replaced(tmp_path, monkeypatch):
    import adapters.sqlite.writer_turn as writer_turn

    path = str(tmp_path / "m.db")
    holder = os.open(f"{path}.writer", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    real = writer_turn.fcntl.flock

    def broken(fd, operation):
        if operation == fcntl.LOCK_EX:  # the waiter's blocking call only
            raise ValueError("a bug in the waiter")
        return real(fd, operation)

    monkeypatch.setattr(writer_turn.fcntl, "flock", broken)
    turn = WriterTurn(path, timeout=60)
    try:
        went_on = threading.Event()
        first = threading.Thread(target=lambda: (turn.__enter__(), turn.__exit__(), went_on.set()))
        first.start()
        assert went_on.wait(10)  # not the 60 s bound: the dead waiter released its writer
        dead = turn._waiter
        assert dead is not None and _until(lambda: not dead.alive)
        monkeypatch.setattr(writer_turn.fcntl, "flock", real)
        entered, held = threading.Event(), []

        def write() -> None:
            with turn:
                held.append(not _turn_free(path))
                entered.set()

        second = threading.Thread(target=write)
        second.start()
        assert _until(lambda: turn._waiter is not dead)  # a new waiter for the next wait
        fcntl.flock(holder, fcntl.LOCK_UN)
        assert entered.wait(10)
        second.join(10)
        assert held == [True] and _turn_free(path)
    finally:
        turn.close()
        os.close(holder)
