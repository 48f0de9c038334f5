"""The ``Sessions`` port and ``SessionWrites`` (through the unit of work), over every adapter.
"""

from __future__ import annotations

import pytest

from domain import writes
from domain.errors import Conflict
from domain.models import NewEntity, NewEpisode, NewRelationship, NewSummary
from ports.store import Store
from tests.contract.store_helpers import NESTED, a_session, tick


async def test_a_created_session_can_be_read_by_id_and_by_external_id(store: Store) -> None:
    created = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {"user": "ada"}))
    assert created.id > 0 and created.external_id == "conv-1" and created.metadata == {"user": "ada"}
    assert created.created_at == created.updated_at
    assert await store.sessions.get(created.id) == created
    assert await store.sessions.by_external_id("conv-1") == created


async def test_unknown_sessions_read_as_none(store: Store) -> None:
    assert await store.sessions.get(999) is None
    assert await store.sessions.by_external_id("nobody") is None


async def test_a_duplicate_external_id_is_a_conflict_on_external_id(store: Store) -> None:
    await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {}))
    with pytest.raises(Conflict) as raised:
        await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {"other": True}))
    assert raised.value.field == "externalId"
    assert (await store.sessions.list(10, 0)).total == 1


async def test_sessions_are_listed_oldest_first_with_the_total_and_pages(store: Store) -> None:
    made = [await store.uow.run(lambda tx: writes.create_session(tx, f"conv-{i}", {})) for i in range(5)]
    first = await store.sessions.list(2, 0)
    assert [s.id for s in first.items] == [made[0].id, made[1].id]
    assert (first.total, first.limit, first.offset) == (5, 2, 0)
    last = await store.sessions.list(2, 4)
    assert [s.id for s in last.items] == [made[4].id] and last.total == 5
    assert (await store.sessions.list(2, 10)).items == []


async def test_updating_a_session_replaces_its_metadata_and_bumps_updated_at(store: Store) -> None:
    session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {"old": 1, "kept": False}))
    await tick()
    updated = await store.uow.run(lambda tx: writes.update_session(tx, session.id, {"new": 2}))
    assert updated is not None and updated.metadata == {"new": 2}
    assert updated.created_at == session.created_at and updated.updated_at > session.updated_at
    assert await store.sessions.get(session.id) == updated


async def test_updating_an_unknown_session_returns_none(store: Store) -> None:
    assert await store.uow.run(lambda tx: writes.update_session(tx, 999, {"x": 1})) is None


async def test_deleting_a_session_returns_true_then_false(store: Store) -> None:
    session = await a_session(store)
    assert await store.uow.run(lambda tx: writes.delete_session(tx, session.id)) is True
    assert await store.uow.run(lambda tx: writes.delete_session(tx, session.id)) is False
    assert await store.sessions.get(session.id) is None


async def test_ids_are_never_reused_after_a_delete(store: Store) -> None:
    first = await a_session(store, "a")
    await store.uow.run(lambda tx: writes.delete_session(tx, first.id))
    assert (await a_session(store, "a")).id > first.id


async def test_metadata_round_trips_nested_json_and_unicode_on_every_record(store: Store) -> None:
    session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-ü", NESTED))
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a", 3, NESTED)]))
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Zoë", "person", "café", NESTED)))).item
    other = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("東京", "place")))).item
    edge = (await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(entity.id, other.id, "lives_in", NESTED)))).item
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "s", metadata=NESTED)))
    assert session.metadata == episode.metadata == entity.metadata == edge.metadata == summary.metadata == NESTED
    assert (await store.sessions.get(session.id)).metadata == NESTED
    assert (await store.episodes.get(episode.id)).metadata == NESTED
    assert (await store.entities.get(entity.id)).metadata == NESTED
    assert (await store.entities.relationships_of(entity.id, "out"))[0].metadata == NESTED
    assert (await store.summaries.get(summary.id)).metadata == NESTED


async def test_metadata_is_stored_by_value_as_json(store: Store) -> None:
    given = {"tags": ["a"], "pair": (1, 2)}
    session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", given))
    given["tags"].append("changed later")
    expected = {"tags": ["a"], "pair": [1, 2]}
    assert session.metadata == expected
    assert (await store.sessions.get(session.id)).metadata == expected


async def test_deleting_a_session_removes_its_episodes_and_summaries_only(store: Store) -> None:
    doomed, kept = await a_session(store, "doomed"), await a_session(store, "kept")
    gone = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(doomed.id, "u", "a"), NewEpisode(doomed.id, "u2", "a2")]))
    [stays] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(kept.id, "u", "a")]))
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(doomed.id, "what happened")))
    kept_summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(kept.id, "what else happened")))
    await store.uow.run(lambda tx: writes.delete_session(tx, doomed.id))
    assert await store.episodes.get_many([e.id for e in gone]) == []
    assert await store.summaries.get(summary.id) is None and await store.summaries.list(doomed.id) == []
    assert await store.episodes.get(stays.id) == stays
    assert await store.summaries.get(kept_summary.id) == kept_summary
    counts = await store.operations.counts()
    assert (counts["sessions"], counts["episodes"], counts["summaries"]) == (1, 1, 1)


async def test_a_session_keeps_its_owner_through_reads_and_updates_and_lists_filter_by_it(store: Store) -> None:
    from domain.models import Owner

    mine = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}, Owner("u1", "bot")))
    theirs = await store.uow.run(lambda tx: writes.create_session(tx, "b", {}, Owner("u2", "bot")))
    nobodys = await store.uow.run(lambda tx: writes.create_session(tx, "c", {}))
    assert (mine.user_id, mine.agent_id) == ("u1", "bot") and nobodys.user_id is None
    assert await store.sessions.get(mine.id) == mine
    updated = await store.uow.run(lambda tx: writes.update_session(tx, mine.id, {"x": 1}))
    assert (updated.user_id, updated.agent_id) == ("u1", "bot")
    assert [s.id for s in (await store.sessions.list(10, 0, Owner("u1"))).items] == [mine.id]
    assert [s.id for s in (await store.sessions.list(10, 0, Owner(agent_id="bot"))).items] == [mine.id, theirs.id]
    assert (await store.sessions.list(10, 0, Owner("u2", "other"))).total == 0
    assert (await store.sessions.list(10, 0)).total == 3


async def test_episodes_and_summaries_carry_their_sessions_owner(store: Store) -> None:
    from domain.models import Owner

    session = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}, Owner("u1", "bot")))
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "s")))
    for record in (episode, await store.episodes.get(episode.id), summary, await store.summaries.get(summary.id)):
        assert (record.user_id, record.agent_id) == ("u1", "bot")
