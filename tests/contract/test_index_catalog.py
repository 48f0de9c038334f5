"""The IndexCatalog contract (manifest and stored embeddings), over the SQLite catalog and the
in-memory one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from adapters.memory.catalog import InMemoryIndexCatalog
from adapters.memory.store import MemoryStore
from adapters.sqlite.catalog import SqliteIndexCatalog
from adapters.postgres.catalog import PostgresIndexCatalog
from tests.contract.conftest import STORE_KINDS, open_store
from domain import writes
from domain.models import EpisodeChanges, NewEntity, NewEpisode
from domain.vectors import ModelRef, decode_vector, encode_vector
from ports.index_catalog import IndexCatalog
from ports.store import Store

MODEL = ModelRef("hash", "hash", 4)
OTHER = ModelRef("fake", "fake", 4)


@pytest.fixture(params=STORE_KINDS)
async def pair(request) -> AsyncIterator[tuple[Store, IndexCatalog]]:
    if request.param == "memory":
        store = MemoryStore()
        yield store, InMemoryIndexCatalog(store)
        return
    store = open_store(request.param, request)
    catalog = PostgresIndexCatalog if request.param == "postgres" else SqliteIndexCatalog
    yield store, catalog(store.database)
    await store.close()


async def _episodes(store: Store, n: int) -> list[int]:
    session = await store.uow.run(lambda tx: writes.create_session(tx, "s", {}))
    made = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", f"a{i}") for i in range(n)]))
    return [e.id for e in made]


async def test_a_model_gets_one_id_and_another_model_another(pair) -> None:
    _, catalog = pair
    first = await catalog.model_id(MODEL)
    assert await catalog.model_id(MODEL) == first
    assert await catalog.model_id(OTHER) != first


async def test_activating_a_generation_retires_the_previous_one_in_one_step(pair) -> None:
    _, catalog = pair
    model = await catalog.model_id(MODEL)
    old = await catalog.add_generation("episodes", model, "episodes-a", "first")
    await catalog.activate(old.id)
    new = await catalog.add_generation("episodes", model, "episodes-b", "rebuild")
    assert [(g.physical, g.state) for g in await catalog.generations()] == [
        ("episodes-a", "active"), ("episodes-b", "building")]
    await catalog.activate(new.id)
    found = await catalog.generations()
    assert [(g.physical, g.state) for g in found] == [("episodes-a", "retired"), ("episodes-b", "active")]
    assert found[1].model == MODEL and found[1].reason == "rebuild"
    await catalog.forget(old.id)
    assert [g.physical for g in await catalog.generations()] == ["episodes-b"]


async def test_stored_embeddings_come_back_per_model_with_their_payload(pair) -> None:
    store, catalog = pair
    ids = await _episodes(store, 3)
    model, other = await catalog.model_id(MODEL), await catalog.model_id(OTHER)
    await catalog.store_embeddings("episodes", model, [(ids[0], encode_vector([1, 0, 0, 0])),
                                                       (ids[1], encode_vector([0, 1, 0, 0]))])
    rows = await catalog.embedding_rows("episodes", model, 0, 10)
    assert [r.id for r in rows] == ids
    assert decode_vector(rows[0].vector) == [1.0, 0.0, 0.0, 0.0] and rows[2].vector is None
    assert rows[0].payload["sessionId"] and rows[0].payload["createdAt"]
    assert [r.vector for r in await catalog.embedding_rows("episodes", other, 0, 10)] == [None] * 3
    assert [r.id for r in await catalog.embedding_rows("episodes", model, ids[0], 1)] == [ids[1]]
    assert await catalog.missing_embeddings("episodes", model) == 1
    assert [r.id for r in await catalog.embeddings_of("episodes", model, [ids[1], 999])] == [ids[1]]


async def test_an_embedding_goes_with_its_record_and_with_its_text(pair) -> None:
    store, catalog = pair
    ids = await _episodes(store, 3)
    model = await catalog.model_id(MODEL)
    await catalog.store_embeddings("episodes", model, [(i, encode_vector([1, 1, 1, 1])) for i in ids])
    await store.uow.run(lambda tx: writes.delete_episode(tx, ids[0]))
    await store.uow.run(lambda tx: writes.update_episode(tx, ids[1], EpisodeChanges(user_message="changed")))
    await store.uow.run(lambda tx: writes.update_episode(tx, ids[2], EpisodeChanges(metadata={"k": "v"})))  # the text is unchanged
    rows = {r.id: r.vector for r in await catalog.embedding_rows("episodes", model, 0, 10)}
    assert list(rows) == ids[1:] and rows[ids[1]] is None and rows[ids[2]] is not None


async def test_embeddings_of_records_that_do_not_exist_are_not_kept(pair) -> None:
    store, catalog = pair
    model = await catalog.model_id(MODEL)
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item
    await catalog.store_embeddings("entities", model, [(entity.id, encode_vector([1, 0, 0, 0])), (999, b"x" * 16)])
    assert await catalog.missing_embeddings("entities", model) == 0
    assert await catalog.row_ids("entities") == [entity.id]


async def test_pending_ids_are_the_records_with_queued_jobs(pair) -> None:
    store, catalog = pair
    ids = await _episodes(store, 2)
    assert await catalog.pending_ids("episodes") == set(ids)
    jobs = await store.outbox.due(10, datetime.now(UTC) + timedelta(seconds=1))
    await store.uow.run(lambda tx: writes.jobs_completed(tx, jobs))
    assert await catalog.pending_ids("episodes") == set()


async def test_expired_ids_are_the_records_past_their_expiry_and_not_yet_purged(pair) -> None:
    store, catalog = pair
    session = await store.uow.run(lambda tx: writes.create_session(tx, "s", {}))
    past, future = "2001-01-01T00:00:00.000Z", "2999-01-01T00:00:00.000Z"
    made = await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(session.id, "gone", "a", expires_at=past), NewEpisode(session.id, "later", "a", expires_at=future),
        NewEpisode(session.id, "kept", "a")]))
    assert await catalog.expired_ids("episodes") == {made[0].id}
    assert await catalog.expired_ids("entities") == set()


async def test_the_store_id_is_stable(pair) -> None:
    _, catalog = pair
    first = await catalog.store_id()
    assert first and await catalog.store_id() == first


async def test_a_reindex_request_is_taken_once_and_repeated_requests_merge(pair) -> None:
    _, catalog = pair
    assert await catalog.take_reindex_request() == []
    await catalog.request_reindex(["episodes"])
    await catalog.request_reindex(["episodes", "entities"])
    assert await catalog.take_reindex_request() == ["entities", "episodes"]
    assert await catalog.take_reindex_request() == []
