"""What only the SQLite store has: a file that outlives the process, WAL, FTS5 and a group-committing
writer thread. The shared contracts are the test_*_contract.py suites; this is the part no double can fake."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import pytest

from adapters.sqlite.driver import sqlite3
from adapters.sqlite.schema import SCHEMA_VERSION
from adapters.sqlite.store import SqliteStore
from domain import writes
from domain.errors import NotFound, Unavailable
from domain.keywords import plain_query
from domain.models import EpisodeChanges, NewEntity, NewEpisode, NewRelationship, NewSummary

FTS_TABLES = ("episodes_fts", "summaries_fts", "entities_fts")
FAR_FUTURE = datetime(2100, 1, 1, tzinfo=UTC)


async def test_data_survives_closing_and_reopening_the_file(sqlite_path: str) -> None:
    store = SqliteStore.open(sqlite_path)
    session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {"k": "v"}))
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "remember the lighthouse", "noted")]))
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "notes")))).item
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "a chat")))
    await store.close()
    await store.close()  # closing twice is harmless

    reopened = SqliteStore.open(sqlite_path)
    try:
        assert await reopened.sessions.get(session.id) == session
        assert await reopened.episodes.get(episode.id) == episode
        assert await reopened.entities.get(entity.id) == entity
        assert await reopened.summaries.get(summary.id) == summary
        hits = await reopened.keywords.search("episodes", plain_query("lighthouse"), 10)
        assert [h.item.id for h in hits] == [episode.id]
        assert (await reopened.outbox.backlog()).pending == 3
        [newer] = await reopened.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
        assert newer.id > episode.id
    finally:
        await reopened.close()


async def test_connections_use_wal_foreign_keys_and_the_current_schema(sqlite_store: SqliteStore) -> None:
    def pragmas(conn: sqlite3.Connection) -> tuple:
        return tuple(conn.execute(f"PRAGMA {name}").fetchone()[0]
                     for name in ("journal_mode", "foreign_keys", "user_version", "busy_timeout"))

    db = sqlite_store.database
    for where in (db.write, db.read):
        journal, foreign_keys, version, busy = await where(pragmas)
        assert (journal, foreign_keys, version) == ("wal", 1, SCHEMA_VERSION)
        assert busy > 0


async def test_the_fts_indexes_pass_their_integrity_check_after_a_mix_of_writes(sqlite_path: str) -> None:
    store = SqliteStore.open(sqlite_path)
    sessions = [await store.uow.run(lambda tx: writes.create_session(tx, f"conv-{i}", {})) for i in range(3)]
    episodes = await store.uow.run(lambda tx: writes.add_episodes(tx, 
        [NewEpisode(s.id, f"question {i} about café ☕", f"answer {i} 東京") for s in sessions for i in range(10)]
    ))
    for episode in episodes[::3]:
        await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(user_message="rewritten words")))
    for episode in episodes[1::4]:
        await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(metadata={"only": "metadata"})))
    for episode in episodes[2::5]:
        await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id))
    ada = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "first")))).item
    bob = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Bob", "person")))).item
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "second notes")))
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows")))
    await store.uow.run(lambda tx: writes.delete_entity(tx, bob.id))
    for s in sessions:
        await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(s.id, f"summary of {s.external_id}")))
    await store.uow.run(lambda tx: writes.delete_session(tx, sessions[0].id))  # cascades: the delete triggers fire for cascaded rows
    await store.close()

    conn = sqlite3.connect(sqlite_path)
    try:
        for table in FTS_TABLES:
            conn.execute(f"INSERT INTO {table}({table}) VALUES('integrity-check')")
        indexed = conn.execute("SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH 'answer'").fetchone()[0]
        assert indexed == conn.execute("SELECT count(*) FROM episodes").fetchone()[0] == 20 - 4
    finally:
        conn.close()


async def test_porter_stemming_and_diacritics_folding_widen_plain_matches(sqlite_store: SqliteStore) -> None:
    session = await sqlite_store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {}))
    [episode] = await sqlite_store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "she was running to the café", "ok")]))
    for text in ("runs", "cafe", "CAFÉ"):
        hits = await sqlite_store.keywords.search("episodes", plain_query(text), 10)
        assert [h.item.id for h in hits] == [episode.id], text


async def test_two_hundred_concurrent_writes_all_succeed_without_duplicate_entities(
    sqlite_store: SqliteStore,
) -> None:
    store = sqlite_store
    session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {}))
    episodes = [store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"message {i}", "reply")])) for i in range(200)]
    entities = [store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", f"note {i}"))) for i in range(200)]
    results = await asyncio.gather(*episodes, *entities)

    episode_ids = [batch[0].id for batch in results[:200]]
    upserts = results[200:]
    assert len(set(episode_ids)) == 200
    assert len(await store.episodes.get_many(episode_ids)) == 200
    assert len({u.item.id for u in upserts}) == 1
    assert sum(u.created for u in upserts) == 1
    counts = await store.operations.counts()
    assert (counts["episodes"], counts["entities"]) == (200, 1)
    assert (await store.entities.by_type("person", 10, 0)).total == 1


async def test_one_failing_write_in_a_group_commit_does_not_fail_its_neighbours(
    sqlite_store: SqliteStore,
) -> None:
    store = sqlite_store
    session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {}))
    gate = threading.Event()
    # Hold the writer thread so the next writes queue up and are committed as one group.
    held = asyncio.ensure_future(store.database.write(lambda conn: gate.wait(30)))
    before = asyncio.ensure_future(store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "before", "a")])))
    failing = asyncio.ensure_future(store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "ok", "a"), NewEpisode(999, "x", "y")])))
    after = asyncio.ensure_future(store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "after", "a")])))
    await asyncio.sleep(0)  # let every write reach the writer's queue
    gate.set()
    outcomes = await asyncio.gather(held, before, failing, after, return_exceptions=True)

    assert outcomes[0] is True
    assert isinstance(outcomes[2], NotFound) and outcomes[2].field == "sessionId"
    [first], [last] = outcomes[1], outcomes[3]
    listed = (await store.episodes.list(session.id, 10, 0)).items
    assert [e.id for e in listed] == [first.id, last.id]
    assert [j.ref_id for j in await store.outbox.due(10, FAR_FUTURE)] == [first.id, last.id]


async def test_a_private_in_memory_database_works_like_a_file(tmp_path) -> None:
    store = SqliteStore.open(":memory:")
    try:
        session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {}))
        [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "ephemeral", "yes")]))
        hits = await store.keywords.search("episodes", plain_query("ephemeral"), 10)
        assert [h.item.id for h in hits] == [episode.id]
        assert await store.operations.health() is None
    finally:
        await store.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["file", "memory"])
async def test_a_closed_store_answers_unavailable_instead_of_hanging(sqlite_path: str, where: str) -> None:
    store = SqliteStore.open(sqlite_path if where == "file" else ":memory:")
    await store.close()
    with pytest.raises(Unavailable):
        await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {}))
    with pytest.raises(Unavailable):
        await store.sessions.get(1)
    problem = await store.operations.health()
    assert isinstance(problem, str) and "closed" in problem


async def test_a_remembered_match_count_is_taken_again_after_a_write(sqlite_store: SqliteStore) -> None:
    # Counts are remembered while the database is unchanged; a write that pushes a query over its
    # budget must change the plan of the very next search (on the loop's connection and a reader's).
    from dataclasses import replace

    session = await sqlite_store.uow.run(lambda tx: writes.create_session(tx, "memo", {}))

    async def add(*texts: str) -> list[int]:
        news = [NewEpisode(session.id, text, "noted") for text in texts]
        return [e.id for e in await sqlite_store.uow.run(lambda tx: writes.add_episodes(tx, news))]

    await add(*(f"filler {n}" for n in range(6)))  # enough rows that the table's size does not bound the count
    first = await add("the quince tree", "a quince jam")
    query = replace(plain_query("quince"), budget=2)
    for _ in range(2):  # the second search answers from the remembered count
        assert {h.item.id for h in await sqlite_store.keywords.search("episodes", query, 10)} == set(first)
    later = await add("quince again", "more quince")
    found = {h.item.id for h in await sqlite_store.keywords.search("episodes", query, 10)}
    assert found == set(later)  # 4 matches over a budget of 2: the newest 2 are ranked
    unbounded = {h.item.id for h in await sqlite_store.keywords.search("episodes", replace(query, budget=None), 10)}
    assert unbounded == set(first + later)
