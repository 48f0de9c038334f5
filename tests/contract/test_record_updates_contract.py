"""Entity and summary updates (PATCH) over every store adapter: what changes, the uniqueness rule,
the keyword index following at once, and the vector job only when the embedded text changed."""

from __future__ import annotations

import pytest

from domain import writes
from domain.errors import Conflict
from domain.keywords import plain_query
from domain.models import EntityChanges, NewEntity, NewSummary, SummaryChanges
from tests.contract.store_helpers import FAR_FUTURE, a_session, tick


async def _jobs(store, collection):
    return [(j.op, j.ref_id) for j in await store.outbox.due(100, FAR_FUTURE) if j.collection == collection]


async def _entity(store, name, kind="person", notes=None, meta=None):
    return (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, kind, notes, meta or {})))).item


async def _words(store, source, words):
    return [h.item.id for h in await store.keywords.search(source, plain_query(words, "all"), 10)]


async def test_an_entity_update_changes_only_what_is_given(store):
    e = await _entity(store, "Ana", notes="cellist", meta={"k": 1})
    await tick()
    after = await store.uow.run(lambda tx: writes.update_entity(tx, e.id, EntityChanges(metadata={"k": 2})))
    assert (after.name, after.type, after.notes, dict(after.metadata)) == ("Ana", "person", "cellist", {"k": 2})
    assert after.created_at == e.created_at and after.updated_at > e.updated_at
    assert await store.entities.get(e.id) == after
    renamed = await store.uow.run(lambda tx: writes.update_entity(tx, e.id, EntityChanges(name="Ana Sousa", notes="")))
    assert (renamed.name, renamed.notes) == ("Ana Sousa", "")


async def test_an_entity_update_reindexes_and_enqueues_only_for_text(store):
    e = await _entity(store, "Ana", notes="cellist")
    before = await _jobs(store, "entities")
    await store.uow.run(lambda tx: writes.update_entity(tx, e.id, EntityChanges(metadata={"x": 1})))
    assert await _jobs(store, "entities") == before  # metadata is not embedded
    await store.uow.run(lambda tx: writes.update_entity(tx, e.id, EntityChanges(notes="violinist")))
    assert await _jobs(store, "entities") == [*before, ("upsert", e.id)]
    assert await _words(store, "entities", "violinist") == [e.id]
    assert await _words(store, "entities", "cellist") == []


async def test_a_rename_onto_another_entity_conflicts_and_changes_nothing(store):
    ana, other = await _entity(store, "Ana"), await _entity(store, "Rui")
    with pytest.raises(Conflict) as caught:
        await store.uow.run(lambda tx: writes.update_entity(tx, other.id, EntityChanges(name="Ana")))
    assert caught.value.field == "name"
    assert await store.entities.get(other.id) == other
    # Same name, other type: allowed (uniqueness is by name and type).
    moved = await store.uow.run(lambda tx: writes.update_entity(tx, other.id, EntityChanges(name="Ana", type="pet")))
    assert (moved.name, moved.type) == ("Ana", "pet") and (await store.entities.get(ana.id)) == ana


async def test_updating_an_unknown_record_returns_none_and_enqueues_nothing(store):
    assert await store.uow.run(lambda tx: writes.update_entity(tx, 999, EntityChanges(notes="x"))) is None
    assert await store.uow.run(lambda tx: writes.update_summary(tx, 999, SummaryChanges(content="x"))) is None
    assert await store.outbox.due(10, FAR_FUTURE) == []


async def test_a_summary_update_changes_content_counts_and_metadata(store):
    s = await a_session(store)
    made = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(s.id, "cats and dogs", 1, 2, 2, 9, {"a": 1})))
    before = await _jobs(store, "summaries")
    counts = await store.uow.run(lambda tx: writes.update_summary(tx, made.id, SummaryChanges(episode_count=5, last_episode_id=7)))
    assert (counts.content, counts.episode_count, counts.last_episode_id, counts.first_episode_id, counts.token_count) \
        == ("cats and dogs", 5, 7, 1, 9)
    assert await _jobs(store, "summaries") == before  # counts are not embedded
    after = await store.uow.run(lambda tx: writes.update_summary(tx, made.id, SummaryChanges(content="parrots only",
                                                                                             metadata={"b": 2})))
    assert (after.content, dict(after.metadata), after.created_at) == ("parrots only", {"b": 2}, made.created_at)
    assert await store.summaries.get(made.id) == after
    assert await _jobs(store, "summaries") == [*before, ("upsert", made.id)]
    assert await _words(store, "summaries", "parrots") == [made.id]
    assert await _words(store, "summaries", "cats") == []
