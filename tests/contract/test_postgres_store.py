"""What only PostgreSQL has among the stores: several processes opening one database at once."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from adapters.postgres import bm25
from adapters.postgres.schema import SCHEMA_VERSION
from adapters.postgres.store import PostgresStore
from domain import writes
from domain.keywords import plain_query
from domain.models import NewEpisode


async def test_opening_migrates_once_and_records_the_version(postgres_url: str) -> None:
    for _ in range(2):
        await PostgresStore.open(postgres_url).close()
    with psycopg.connect(postgres_url) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))


async def test_a_database_newer_than_the_code_is_refused(postgres_url: str) -> None:
    await PostgresStore.open(postgres_url).close()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO schema_migrations(version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(RuntimeError, match="newer"):
        PostgresStore.open(postgres_url)


async def test_a_write_by_one_store_is_read_and_searched_by_another(postgres_url: str) -> None:
    writer, reader = PostgresStore.open(postgres_url), PostgresStore.open(postgres_url)
    try:
        session = await writer.uow.run(lambda tx: writes.create_session(tx, "shared", {}))
        [episode] = await writer.uow.run(lambda tx: writes.add_episodes(
            tx, [NewEpisode(session.id, "she was running to the café", "ok")]))
        assert (await reader.episodes.get(episode.id)).user_message == "she was running to the café"
        for text in ("runs", "café", "she"):  # stemmed like porter, and no stop words left out
            assert [h.item.id for h in await reader.keywords.search("episodes", plain_query(text), 10)] == [episode.id]
    finally:
        await writer.close()
        await reader.close()


async def test_events_committed_by_another_store_wake_a_watcher(postgres_url: str) -> None:
    watcher, writer = PostgresStore.open(postgres_url), PostgresStore.open(postgres_url)
    woken = asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        watcher.events.on_change(lambda: loop.call_soon_threadsafe(woken.set))
        await asyncio.wait_for(woken.wait(), 30)  # the first call: listening has begun
        woken.clear()
        await writer.uow.run(lambda tx: writes.create_session(tx, "elsewhere", {}))
        await asyncio.wait_for(woken.wait(), 30)
    finally:
        await watcher.close()
        await writer.close()


def _copy_episodes(url: str, session_id: int, texts: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy("COPY episodes (session_id, user_message, ai_response, created_at) FROM STDIN") as copy:
            for text in texts:
                copy.write_row((session_id, text, "noted", "2026-01-01T00:00:00.000Z"))


async def test_keyword_ranking_reuses_its_statistics_on_a_large_table_and_stays_defined(postgres_url: str) -> None:
    warmed = PostgresStore.open(postgres_url)
    try:
        session = await warmed.uow.run(lambda tx: writes.create_session(tx, "big", {}))
        words = ("harbour", "kitten", "budget", "lisbon", "cello", "ramen")
        _copy_episodes(postgres_url, session.id, [f"{words[i % 6]} {words[(i * 5) % 6]} note{i % 50}"
                                                  for i in range(bm25.EXACT_BELOW + 1000)])

        async def scores(store: PostgresStore, text: str) -> list[tuple[int, float]]:
            hits = await store.keywords.search("episodes", plain_query(text, "any"), 20)
            return [(h.item.id, round(h.score, 9)) for h in hits]

        async def fresh(text: str) -> list[tuple[int, float]]:
            store = PostgresStore.open(postgres_url)
            try:
                return await scores(store, text)
            finally:
                await store.close()

        assert await scores(warmed, "kitten cello") == await fresh("kitten cello")
        # A few new records (under a tenth more): a lexeme first seen now still ranks, its IDF defined.
        _copy_episodes(postgres_url, session.id, ["zeppelin harbour"] * 5)
        [first, *_] = await scores(warmed, "zeppelin")
        assert 0 < first[1] < float("inf")
        # Grown by more than a tenth: the statistics are read again, exactly as a new process reads them.
        _copy_episodes(postgres_url, session.id, ["zeppelin budget"] * 1000)
        assert await scores(warmed, "zeppelin budget") == await fresh("zeppelin budget")
    finally:
        await warmed.close()
