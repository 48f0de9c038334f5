"""``memory-service migrate-store``: a SQLite store copied into PostgreSQL keeps every id, record,
version, event, job, stored embedding, API key and keyed write's answer, and the copy serves at once."""

from __future__ import annotations

import pytest

import asyncio
from pathlib import Path

from adapters.postgres.api_keys import PostgresApiKeys
from adapters.postgres.catalog import PostgresIndexCatalog
from adapters.postgres.store import PostgresStore
from adapters.sqlite.api_keys import SqliteApiKeys
from adapters.sqlite.catalog import SqliteIndexCatalog
from adapters.sqlite.store import SqliteStore
from domain import writes
from domain.access import new_key
from domain.idempotency import KeyedAnswer
from domain.keywords import plain_query
from domain.listing import ListQuery
from domain.models import NewEntity, NewEpisode, NewRelationship, NewSummary
from domain.vectors import ModelRef
from tests.contract.store_helpers import FAR_FUTURE
from tests.support.server import run_service, service_env

# SQLite only under TEST_STORE=postgres: the source of the copy is a SQLite file.
pytestmark = pytest.mark.sqlite_only

MODEL = ModelRef("hash", "hash", 4)
NOW, LATER = "2026-01-01T00:00:00.000Z", "2100-01-01T00:00:00.000Z"


async def _fill(path: Path) -> dict:
    store = SqliteStore.open(str(path))
    try:
        session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {"topic": "boats"}))
        episodes = await store.uow.run(lambda tx: writes.add_episodes(tx, [
            NewEpisode(session.id, f"the harbour at dawn {n}", "noted", metadata={"n": n}) for n in range(5)]))
        await store.uow.run(lambda tx: writes.delete_episode(tx, episodes[0].id))  # a gap in the ids
        ada = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "Zoë's friend")))).item
        boat = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Skylark", "boat")))).item
        await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, boat.id, "owns")))
        summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "a day at the harbour")))
        catalog = SqliteIndexCatalog(store.database)
        model = await catalog.model_id(MODEL)
        await catalog.store_embeddings("episodes", model, [(episodes[1].id, b"\x01\x02\x03\x04")])
        keys = SqliteApiKeys(store.database)
        admin = await keys.create(new_key("admin", scopes=["admin"], now=NOW)[1])
        bound = await keys.create(new_key("ada's", user_id="ada", global_read=False, rate_limit=2.5, now=NOW)[1])
        revoked = await keys.revoke(bound.id, NOW)
        answer = KeyedAnswer("bearer:1", "retry-me", "f" * 64, 201, b'{"id":2,"t":"\xc3\xa9"}', NOW, LATER)
        await store.uow.run(lambda tx: tx.idempotency.put(answer))
        return {"keys": [admin, revoked], "answer": answer, "session": session, "episodes": episodes[1:],
                "jobs": await store.outbox.due(100, FAR_FUTURE), "ada": ada, "boat": boat, "summary": summary,
                "store_id": await catalog.store_id(), "events": await store.events.bounds(),
                "history": await store.history.of_record("episodes", episodes[0].id, 0, 10)}
    finally:
        await store.close()


async def _check(url: str, before: dict) -> None:
    store = PostgresStore.open(url)
    try:
        session = await store.sessions.get(before["session"].id)
        assert session == before["session"]
        for episode in before["episodes"]:
            assert await store.episodes.get(episode.id) == episode
        hits = await store.keywords.search("episodes", plain_query("harbour dawn"), 10)
        assert sorted(h.item.id for h in hits) == [e.id for e in before["episodes"]]
        assert [r.to_id for r in await store.entities.relationships_of(before["ada"].id, "out")] == [before["boat"].id]
        assert (await store.entities.find_by_name("ada", 5))[0].notes == "Zoë's friend"
        assert await store.summaries.get(before["summary"].id) == before["summary"]
        assert await store.events.bounds() == before["events"]
        assert await store.outbox.due(100, FAR_FUTURE) == before["jobs"]
        assert await store.history.of_record("episodes", before["episodes"][0].id - 1, 0, 10) == before["history"]
        listed = await store.listing.episodes(ListQuery(limit=10))
        assert [e.id for e in listed.items] == [e.id for e in before["episodes"]]
        catalog = PostgresIndexCatalog(store.database)
        assert await catalog.store_id() == before["store_id"]
        [row] = await catalog.embeddings_of("episodes", await catalog.model_id(MODEL), [before["episodes"][0].id])
        assert row.vector == b"\x01\x02\x03\x04"
        keys = PostgresApiKeys(store.database)
        assert await keys.list() == before["keys"]
        assert await keys.by_hash(before["keys"][1].key_hash) == before["keys"][1]
        assert (await keys.create(new_key("after", now=NOW)[1])).id > before["keys"][-1].id
        answer = before["answer"]
        assert await store.idempotency.get(answer.caller, answer.key, NOW) == answer
        # New records continue after the copied ids.
        more = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "later", "x")]))
        assert more[0].id > before["episodes"][-1].id
    finally:
        await store.close()


def test_a_sqlite_store_is_copied_into_postgresql_with_its_ids(tmp_path: Path, postgres_url: str) -> None:
    path = tmp_path / "memory.db"
    before = asyncio.run(_fill(path))
    done = run_service(["migrate-store", "--from", f"sqlite:{path}", "--to", postgres_url], service_env(None))
    assert done.returncode == 0, done.stderr
    assert "copied" in done.stdout
    asyncio.run(_check(postgres_url, before))


def test_a_target_that_holds_records_is_refused(tmp_path: Path, postgres_url: str) -> None:
    path = tmp_path / "memory.db"
    asyncio.run(_fill(path))
    first = run_service(["migrate-store", "--from", str(path), "--to", postgres_url], service_env(None))
    assert first.returncode == 0, first.stderr
    again = run_service(["migrate-store", "--from", str(path), "--to", postgres_url], service_env(None))
    assert again.returncode == 1 and "already holds records" in again.stderr


def test_a_missing_source_is_one_clear_line(tmp_path: Path, postgres_url: str) -> None:
    done = run_service(["migrate-store", "--from", str(tmp_path / "none.db"), "--to", postgres_url], service_env(None))
    assert done.returncode == 1 and "no SQLite store" in done.stderr
