"""Once writes pause, the writer thread merges the segments small commits left in the FTS5
keyword indexes: fewer segments, the same answers, no write lost or kept waiting for long.
Real SQLite files."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.sqlite.driver import sqlite3
from adapters.sqlite.keyword_upkeep import IDLE_SECONDS, STEP_GAP, KeywordUpkeep
from adapters.sqlite.store import SqliteStore
from domain import writes
from domain.keywords import plain_query
from domain.models import NewEpisode

WORDS = ["harbour", "lantern", "orchard", "violin", "glacier", "saffron", "meadow", "compass"]


def _segments(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(DISTINCT segid) FROM episodes_fts_idx").fetchone()[0]


async def _add_one_by_one(store: SqliteStore, session: int, count: int) -> None:
    for n in range(count):  # each its own commit: each leaves a segment
        text = f"{WORDS[n % len(WORDS)]} {WORDS[(n * 3) % len(WORDS)]} note {n}"
        await store.uow.run(lambda tx, text=text: writes.add_episodes(
            tx, [NewEpisode(session_id=session, user_message=text, ai_response="kept")]))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore.open(str(tmp_path / "upkeep.db"))
    yield store
    store.database.close()


@pytest.fixture
def schema_db(tmp_path: Path) -> Path:
    """A store file with the schema (its writer closed again): tests drive the keyword indexes by hand."""
    path = tmp_path / "plain.db"
    SqliteStore.open(str(path)).database.close()
    return path


def _connect(path: Path, **options) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, **options)  # autocommit: each insert its own segment


def _index(conn: sqlite3.Connection, texts: list[str]) -> None:
    for n, text in enumerate(texts):
        conn.execute("INSERT INTO episodes_fts(rowid, user_message, ai_response) VALUES (?, ?, 'x')", (n + 1, text))


async def _hits(store: SqliteStore) -> dict[str, list[int]]:
    return {word: [(hit.item.id, round(hit.score, 9)) for hit in await store.keywords.search("episodes", plain_query(word), 50)] for word in WORDS}


async def test_after_a_pause_the_segments_of_many_small_commits_are_merged_and_answers_stay_the_same(store, tmp_path):
    path = tmp_path / "upkeep.db"
    session = (await store.uow.run(lambda tx: writes.create_session(tx, "upkeep", {}))).id
    await _add_one_by_one(store, session, 120)
    before, hits = _segments(path), await _hits(store)
    assert before >= 8  # automerge (four per level) leaves several
    merged = before
    for _ in range(200):  # bounded: about 10 s
        await asyncio.sleep(0.05)
        if (merged := _segments(path)) <= 3:
            break
    assert merged < before and merged <= 3
    assert await _hits(store) == hits
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('integrity-check')")
    # Writes go on as before, and the next pause merges again.
    await _add_one_by_one(store, session, 40)
    assert len((await _hits(store))["harbour"]) == 20


def test_the_writer_waits_forever_until_a_write_then_for_the_idle_time_then_merges_until_done(schema_db):
    path = schema_db
    conn = _connect(path)
    _index(conn, [f"word{n % 7} other" for n in range(60)])
    upkeep = KeywordUpkeep(conn)
    assert upkeep.wait() is None
    upkeep.written()
    assert upkeep.wait() == IDLE_SECONDS
    steps = 0
    while upkeep.wait() is not None and steps < 100:
        upkeep.step()
        steps += 1
        assert upkeep.wait() in (STEP_GAP, None)  # while there is work: shortly
    assert upkeep.wait() is None and 1 < steps < 100
    assert conn.execute("SELECT count(DISTINCT segid) FROM episodes_fts_idx").fetchone()[0] <= 2
    conn.close()


def test_no_step_is_taken_while_another_connection_holds_the_write_lock(schema_db):
    path = schema_db
    conn, other = _connect(path), _connect(path)
    _index(conn, ["a b", "a c"])
    other.execute("BEGIN IMMEDIATE")  # another process's writer holds SQLite's write lock
    upkeep, changes = KeywordUpkeep(conn), conn.total_changes
    upkeep.written()
    upkeep.step()  # returns at once: the busy timeout is not waited out
    assert conn.total_changes == changes and not conn.in_transaction  # nothing done
    assert upkeep.wait() == IDLE_SECONDS  # tried again after the idle time
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0  # the connection's own timeout is back
    other.execute("ROLLBACK")
    upkeep.step()  # the lock is free again: it runs, and sets usermerge then
    assert conn.execute("SELECT v FROM episodes_fts_config WHERE k = 'usermerge'").fetchone() == (2,)
    other.execute("BEGIN IMMEDIATE")  # the step committed: the lock is free for others
    other.execute("ROLLBACK")
    other.close()
    conn.close()


def test_an_fts5vocab_table_is_not_taken_for_a_keyword_index(schema_db):
    path = schema_db
    conn = _connect(path)
    conn.execute("CREATE VIRTUAL TABLE episodes_vocab USING fts5vocab(episodes_fts, 'row')")
    _index(conn, ["word"] * 30)
    upkeep = KeywordUpkeep(conn)
    upkeep.written()
    for _ in range(50):
        upkeep.step()
        if upkeep.wait() is None:
            break
    assert conn.execute("SELECT count(DISTINCT segid) FROM episodes_fts_idx").fetchone()[0] <= 2
    conn.close()


def test_an_unexpected_failure_in_a_step_rolls_back_and_leaves_the_writer_able_to_write(schema_db, monkeypatch):
    path = schema_db
    conn = _connect(path)
    upkeep = KeywordUpkeep(conn)

    def broken(table):
        raise RuntimeError("not a sqlite3 error")

    monkeypatch.setattr(upkeep, "_merge", broken)
    upkeep.written()
    upkeep.step()
    assert not conn.in_transaction and upkeep.wait() is None
    conn.execute("BEGIN IMMEDIATE")  # the next write's transaction can start
    conn.execute("ROLLBACK")
    conn.close()
