"""Short reads on the event loop's own connection (``SqliteDatabase.read_short``): a read within its
SQLite step budget answers on the calling thread; one that runs over is stopped and answered by a
reader thread, with the same answer; a read whose code mostly runs over goes to the readers at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.driver import sqlite3
from adapters.sqlite.short_reads import PROBE_EVERY, OverflowRates
from domain.errors import Invalid, Unavailable

# A read of about 100,000 VM steps: far over a budget of 1,000, and its answer is known.
LONG = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) SELECT sum(i) FROM n"
LONG_SUM = 20000 * 20001 // 2


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SqliteDatabase]:
    database = SqliteDatabase(str(tmp_path / "short.db"))
    yield database
    database.close()


def _answer(sql: str, threads: list[int]):
    def op(conn: sqlite3.Connection):
        threads.append(threading.get_ident())
        return conn.execute(sql).fetchone()[0]
    return op


async def test_a_read_within_its_budget_answers_on_the_calling_thread(db: SqliteDatabase) -> None:
    threads: list[int] = []
    assert await db.read_short(_answer("SELECT 6 * 7", threads)) == 42
    assert threads == [threading.get_ident()]


async def test_a_read_over_its_budget_is_answered_in_full_by_a_reader_thread(db: SqliteDatabase) -> None:
    threads: list[int] = []
    assert await db.read_short(_answer(LONG, threads), steps=1_000) == LONG_SUM
    assert threads[0] == threading.get_ident() and len(threads) == 2 and threads[1] != threading.get_ident()
    # the same read with room enough stays on the loop, with the same answer
    threads.clear()
    assert await db.read_short(_answer(LONG, threads), steps=10_000_000) == LONG_SUM
    assert threads == [threading.get_ident()]


async def test_an_interrupted_read_that_swallows_the_error_is_not_trusted(db: SqliteDatabase) -> None:
    threads: list[int] = []

    def forgiving(conn: sqlite3.Connection):
        threads.append(threading.get_ident())
        try:
            return conn.execute(LONG).fetchone()[0]
        except sqlite3.OperationalError:
            return "partial"

    assert await db.read_short(forgiving, steps=1_000) == LONG_SUM
    assert len(threads) == 2


async def test_an_error_raised_because_of_the_interruption_is_not_the_answer(db: SqliteDatabase) -> None:
    # The keyword search turns an OperationalError of a raw FTS5 query into a 400: an interruption
    # on the loop must not reach the caller as one.
    def strict(conn: sqlite3.Connection):
        try:
            return conn.execute(LONG).fetchone()[0]
        except sqlite3.OperationalError as exc:
            raise Invalid(f"invalid query: {exc}", field="q") from None

    assert await db.read_short(strict, steps=1_000) == LONG_SUM


async def test_a_failing_read_within_its_budget_fails_as_a_pooled_read_does(db: SqliteDatabase) -> None:
    def broken(conn: sqlite3.Connection):
        return conn.execute("SELECT * FROM no_such_table").fetchall()

    with pytest.raises(Unavailable) as on_loop:
        await db.read_short(broken)
    with pytest.raises(Unavailable) as pooled:
        await db.read(broken)
    assert str(on_loop.value) == str(pooled.value)

    def refusing(conn: sqlite3.Connection):
        raise Invalid("no", field="q")

    with pytest.raises(Invalid):
        await db.read_short(refusing)


async def test_a_read_that_keeps_running_over_goes_to_the_readers_and_is_probed_again(db: SqliteDatabase) -> None:
    threads: list[int] = []
    here = threading.get_ident()
    for _ in range(4 * PROBE_EVERY):
        assert await db.read_short(_answer(LONG, threads), steps=1_000) == LONG_SUM
    tried_here = threads.count(here)
    # first every read is tried on the loop; after a few overflows only one in PROBE_EVERY is
    assert 4 <= tried_here < 2 * PROBE_EVERY
    assert len(threads) - tried_here == 4 * PROBE_EVERY  # every one answered by a reader


async def test_the_in_memory_database_answers_short_reads_too() -> None:
    memory = SqliteDatabase(":memory:")
    try:
        assert await memory.read_short(lambda conn: conn.execute("SELECT 6 * 7").fetchone()[0]) == 42
    finally:
        memory.close()


def test_a_code_that_overflows_now_and_then_stays_on_the_loop() -> None:
    rates = OverflowRates()
    site = object()
    for n in range(200):
        assert rates.inline(site)
        rates.record(site, n % 10 == 0)  # one read in ten runs over
    assert rates.rate(site) < 0.5


def test_a_code_that_mostly_overflows_is_probed_one_in_probe_every() -> None:
    rates = OverflowRates()
    site = object()
    tried = 0
    for _ in range(20 * PROBE_EVERY):
        if rates.inline(site):
            tried += 1
            rates.record(site, True)
    assert rates.rate(site) > 0.5
    assert tried <= 20 + 6  # the first few (until the rate passes one half), then one in PROBE_EVERY
    # once it fits again, its probes bring it back to the loop
    for _ in range(10 * PROBE_EVERY):
        if rates.inline(site):
            rates.record(site, False)
    assert rates.inline(site) and rates.rate(site) < 0.5


async def test_reads_of_one_code_are_judged_by_their_own_site(db: SqliteDatabase) -> None:
    # One helper (``Reads._all``) serves every list query: a query that always runs over must not
    # send the short ones it shares a code with to the readers.
    def read(sql: str, threads: list[int]):
        return db.read_short(_answer(sql, threads), steps=1_000, site=sql)

    long_threads: list[int] = []
    for _ in range(2 * PROBE_EVERY):
        await read(LONG, long_threads)
    assert long_threads.count(threading.get_ident()) < PROBE_EVERY  # that one goes to the readers
    short_threads: list[int] = []
    assert await read("SELECT 6 * 7", short_threads) == 42
    assert short_threads == [threading.get_ident()]  # this one still answers on the loop


async def test_while_other_reads_are_on_the_readers_a_short_read_joins_them_and_leaves_the_loop_free(
        db: SqliteDatabase) -> None:
    import asyncio

    started, release = threading.Event(), threading.Event()

    def held(conn: sqlite3.Connection) -> int:
        started.set()
        release.wait(30)
        return 1

    pending = asyncio.ensure_future(db.read(held))
    while not started.is_set():
        await asyncio.sleep(0.01)
    threads: list[int] = []
    assert await db.read_short(_answer("SELECT 6 * 7", threads)) == 42
    assert threads and threads != [threading.get_ident()]  # answered by a reader, not on the loop
    release.set()
    assert await pending == 1
    threads.clear()
    assert await db.read_short(_answer("SELECT 6 * 7", threads)) == 42
    assert threads == [threading.get_ident()]  # alone again: on the loop


async def test_a_busy_short_read_waits_on_the_pool_without_its_step_budget_left_on_the_loop_connection(
        db: SqliteDatabase) -> None:
    """The loop's connection also serves ``read_point``: a budget left on it while the busy read
    waits would interrupt every point read meanwhile (they answered 503)."""
    import asyncio

    await db.write(lambda c: c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v)"))
    await db.write(lambda c: c.executemany("INSERT INTO t (v) VALUES (?)", [(i,) for i in range(2000)]))
    calls, release = [], threading.Event()

    def busy_once(conn: sqlite3.Connection) -> int:
        calls.append(threading.get_ident())
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        release.wait(30)  # the pooled retry stays in flight while the point reads run
        return 1

    pending = asyncio.ensure_future(db.read_short(busy_once))
    while len(calls) < 2:
        await asyncio.sleep(0.01)
    counts = [await db.read_point(lambda c: c.execute("SELECT count(*) FROM t WHERE v >= 0").fetchone()[0])
              for _ in range(50)]
    release.set()
    assert await pending == 1
    assert counts == [2000] * 50
    assert calls[0] == threading.get_ident() and calls[1] != calls[0]  # tried on the loop, then on a reader


def _pragmas(conn: sqlite3.Connection) -> tuple[int, int]:
    return conn.execute("PRAGMA mmap_size").fetchone()[0], conn.execute("PRAGMA cache_size").fetchone()[0]


async def test_only_the_event_loops_connection_maps_the_file_and_every_cache_is_bounded(db: SqliteDatabase) -> None:
    # Each mapping's pages count in the process's RSS: the readers' long reads and the writer's
    # changes go through bounded page caches, the loop's point and short reads through the map.
    from adapters.sqlite.connection import CACHE_KIB, MMAP_BYTES

    loop = await db.read_short(_pragmas)
    pooled = await db.read(_pragmas)
    writer = await db.write(_pragmas)
    assert loop == (MMAP_BYTES, -CACHE_KIB)
    assert pooled == (0, -CACHE_KIB)
    assert writer == (0, -CACHE_KIB)
