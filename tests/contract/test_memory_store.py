"""The MemoryStore contract (ports/memory_store.py), run over every adapter by the ``store`` fixture.

Where adapters truly differ (FTS5 syntax in ``fts`` mode) the suite reads the port's
``supports_fts_syntax``; it never asks which adapter it holds. Search and outbox behaviour live
in test_memory_store_search.py; what only a SQLite file has, in test_sqlite_memory_store.py.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from domain import writes
from domain.errors import Conflict, Invalid, NotFound
from domain.models import (
    EpisodeChanges, NewEntity, NewEpisode, NewRelationship, NewSummary, Session, format_timestamp,
)
from ports.store import Store

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NESTED = {"tags": ["a", "b"], "deep": {"n": 1, "x": [1.5, None, True]}, "naïve": "Zoë 東京 😀", "empty": {}}


def at(minutes: int) -> str:
    return format_timestamp(T0 + timedelta(minutes=minutes))


async def a_session(store: Store, external_id: str = "conv-1") -> Session:
    return await store.uow.run(lambda tx: writes.create_session(tx, external_id, {}))


async def tick() -> None:
    # Timestamps have millisecond resolution; a later write must land in a later millisecond.
    await asyncio.sleep(0.005)


# ---- sessions ------------------------------------------------------------------------------------


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


# ---- episodes ------------------------------------------------------------------------------------


async def test_an_added_episode_can_be_read_back(store: Store) -> None:
    session = await a_session(store)
    [added] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "hello", "hi there", 7, {"k": "v"})]))
    assert (added.session_id, added.user_message, added.ai_response, added.token_count) == (
        session.id, "hello", "hi there", 7)
    assert added.created_at.endswith("Z") and len(added.created_at) == len("2025-03-01T12:00:00.000Z")
    assert await store.episodes.get(added.id) == added
    assert await store.episodes.get(added.id + 1000) is None


async def test_a_batch_of_episodes_is_added_in_order_with_increasing_ids(store: Store) -> None:
    session = await a_session(store)
    added = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", f"a{i}") for i in range(3)]))
    assert [e.user_message for e in added] == ["u0", "u1", "u2"]
    assert [e.id for e in added] == sorted(e.id for e in added) and len({e.id for e in added}) == 3
    assert (await store.episodes.list(session.id, 10, 0)).total == 3


async def test_a_batch_with_an_unknown_session_inserts_nothing(store: Store) -> None:
    session = await a_session(store)
    before = await store.operations.counts()
    batch = [NewEpisode(session.id, "fine", "fine"), NewEpisode(999, "orphan", "orphan")]
    with pytest.raises(NotFound) as raised:
        await store.uow.run(lambda tx: writes.add_episodes(tx, batch))
    assert raised.value.field == "sessionId"
    assert await store.operations.counts() == before
    assert (await store.episodes.list(session.id, 10, 0)).total == 0


async def test_get_episodes_follows_the_order_given_and_skips_unknown_ids(store: Store) -> None:
    session = await a_session(store)
    a, b, c = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, n, n) for n in ("a", "b", "c")]))
    found = await store.episodes.get_many([c.id, 999, a.id, b.id])
    assert [e.id for e in found] == [c.id, a.id, b.id]
    assert await store.episodes.get_many([]) == []


async def test_updating_an_episode_changes_only_the_fields_given(store: Store) -> None:
    session = await a_session(store)
    [old] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "question", "answer", 5, {"m": 1})]))
    updated = await store.uow.run(lambda tx: writes.update_episode(tx, old.id, EpisodeChanges(ai_response="better answer")))
    assert updated is not None
    assert (updated.user_message, updated.ai_response, updated.token_count, updated.metadata) == (
        "question", "better answer", 5, {"m": 1})
    assert (updated.created_at, updated.session_id) == (old.created_at, old.session_id)
    again = await store.uow.run(lambda tx: writes.update_episode(tx, old.id, EpisodeChanges(token_count=9, metadata={"m": 2})))
    assert (again.ai_response, again.token_count, again.metadata) == ("better answer", 9, {"m": 2})
    assert await store.episodes.get(old.id) == again


async def test_updating_an_unknown_episode_returns_none(store: Store) -> None:
    assert await store.uow.run(lambda tx: writes.update_episode(tx, 999, EpisodeChanges(user_message="x"))) is None


async def test_deleting_an_episode_returns_true_then_false(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
    assert await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id)) is True
    assert await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id)) is False
    assert await store.episodes.get(episode.id) is None


async def test_episodes_are_listed_oldest_first_with_offset_and_total(store: Store) -> None:
    session, other = await a_session(store, "a"), await a_session(store, "b")
    added = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a") for i in range(5)]))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(other.id, "elsewhere", "a")]))
    page = await store.episodes.list(session.id, 2, 1)
    assert [e.id for e in page.items] == [added[1].id, added[2].id]
    assert (page.total, page.limit, page.offset) == (5, 2, 1)
    assert (await store.episodes.list(999, 10, 0)).total == 0


async def test_a_supplied_created_at_is_kept_and_orders_the_list(store: Store) -> None:
    session = await a_session(store)
    late, early, now = await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(session.id, "late", "a", created_at=at(60)),
        NewEpisode(session.id, "early", "a", created_at=at(0)),
        NewEpisode(session.id, "now", "a"),
    ]))
    assert (early.created_at, late.created_at) == (at(0), at(60))
    listed = (await store.episodes.list(session.id, 10, 0)).items
    assert [e.id for e in listed] == [early.id, late.id, now.id]


async def test_a_supplied_created_at_is_stored_in_the_canonical_format(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a", created_at="2025-03-01T14:00:00+02:00")]))
    assert episode.created_at == "2025-03-01T12:00:00.000Z"
    assert (await store.episodes.get(episode.id)).created_at == "2025-03-01T12:00:00.000Z"


async def test_a_malformed_created_at_is_invalid_and_inserts_nothing(store: Store) -> None:
    session = await a_session(store)
    with pytest.raises(Invalid) as raised:
        await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a"), NewEpisode(session.id, "u", "a", created_at="soon")]))
    assert raised.value.field == "createdAt"
    assert (await store.episodes.list(session.id, 10, 0)).total == 0


async def test_recent_episodes_are_the_newest_first(store: Store) -> None:
    session, other = await a_session(store, "a"), await a_session(store, "b")
    added = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a", created_at=at(i)) for i in range(5)]))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(other.id, "newer but elsewhere", "a", created_at=at(99))]))
    recent = await store.episodes.recent(session.id, 3)
    assert [e.id for e in recent] == [added[4].id, added[3].id, added[2].id]


# ---- cascades ------------------------------------------------------------------------------------


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


async def test_deleting_an_entity_removes_relationships_on_both_ends(store: Store) -> None:
    ada, bob, cy = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "person")))).item for n in ("Ada", "Bob", "Cy")]
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows")))
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(cy.id, bob.id, "knows")))
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(bob.id, cy.id, "mentors")))
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, cy.id, "knows")))
    assert await store.uow.run(lambda tx: writes.delete_entity(tx, bob.id)) is True
    assert await store.entities.relationships_of(bob.id, "both") == []
    left = await store.entities.relationships_of(cy.id, "both")
    assert [(r.from_id, r.to_id, r.label) for r in left] == [(ada.id, cy.id, "knows")]
    assert (await store.operations.counts())["relationships"] == 1


# ---- entities ------------------------------------------------------------------------------------


async def test_upserting_an_entity_creates_it_then_updates_it_in_place(store: Store) -> None:
    first = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "a mathematician", {"v": 1})))
    assert first.created is True and first.item.notes == "a mathematician"
    await tick()
    second = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "wrote the first program", {"v": 2})))
    assert second.created is False and second.item.id == first.item.id
    assert (second.item.notes, second.item.metadata) == ("wrote the first program", {"v": 2})
    assert second.item.created_at == first.item.created_at and second.item.updated_at > first.item.updated_at
    assert await store.entities.get(first.item.id) == second.item
    assert (await store.operations.counts())["entities"] == 1


async def test_the_same_name_with_another_type_is_another_entity(store: Store) -> None:
    person = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Paris", "person")))
    city = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Paris", "city")))
    assert city.created is True and city.item.id != person.item.id
    assert await store.entities.get(999) is None


async def test_entities_by_type_are_ordered_by_name_with_total(store: Store) -> None:
    for name in ("Cy", "Ada", "Bob"):
        await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, "person")))
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Aardvark", "animal")))
    page = await store.entities.by_type("person", 2, 0)
    assert [e.name for e in page.items] == ["Ada", "Bob"] and page.total == 3
    assert [e.name for e in (await store.entities.by_type("person", 2, 2)).items] == ["Cy"]
    assert (await store.entities.by_type("robot", 10, 0)).total == 0


async def test_get_entities_follows_the_order_given_and_skips_unknown_ids(store: Store) -> None:
    a, b = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "t")))).item for n in ("A", "B")]
    assert [e.id for e in await store.entities.get_many([b.id, 999, a.id])] == [b.id, a.id]


async def test_finding_entities_by_name_is_case_insensitive_substring_exact_first(store: Store) -> None:
    for name in ("Alicia", "Malice", "alice", "Bob"):
        await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, "person")))
    found = await store.entities.find_by_name("ALICE", 10)
    assert found[0].name == "alice"
    assert sorted(e.name for e in found) == ["Malice", "alice"]
    assert [e.name for e in await store.entities.find_by_name("li", 10)][0:3] == ["Alicia", "Malice", "alice"]
    assert len(await store.entities.find_by_name("li", 1)) == 1


async def test_percent_and_underscore_in_a_name_query_are_literal(store: Store) -> None:
    for name in ("100% juice", "1000 juice", "snake_case", "snakeXcase"):
        await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, "thing")))
    assert [e.name for e in await store.entities.find_by_name("0%", 10)] == ["100% juice"]
    assert [e.name for e in await store.entities.find_by_name("e_c", 10)] == ["snake_case"]
    assert await store.entities.find_by_name("%", 10) == (await store.entities.find_by_name("100%", 10))


async def test_name_matching_folds_case_beyond_ascii(store: Store) -> None:
    zoe = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("ZOË", "person")))).item
    assert [e.id for e in await store.entities.find_by_name("zoë", 10)] == [zoe.id]
    assert [e.id for e in await store.entities.mentioned_in(["I met zoë yesterday"], 10)] == [zoe.id]


async def test_entities_mentioned_in_texts_match_whole_words_only(store: Store) -> None:
    al = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Al", "person")))).item
    alice = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Alice", "person")))).item
    ny = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("New York", "city")))).item
    assert await store.entities.mentioned_in(["Alice met Bob"], 10) == [alice]
    found = await store.entities.mentioned_in(["nothing here", "al flew to new york, then Alice left."], 10)
    assert {e.id for e in found} == {al.id, alice.id, ny.id}
    assert len(await store.entities.mentioned_in(["Al, Alice, New York"], 2)) == 2
    assert await store.entities.mentioned_in(["", "   "], 10) == []


async def test_deleting_an_entity_returns_true_then_false(store: Store) -> None:
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item
    assert await store.uow.run(lambda tx: writes.delete_entity(tx, entity.id)) is True
    assert await store.uow.run(lambda tx: writes.delete_entity(tx, entity.id)) is False
    assert await store.entities.get(entity.id) is None


# ---- relationships -------------------------------------------------------------------------------


async def test_upserting_a_relationship_creates_it_then_updates_its_metadata(store: Store) -> None:
    ada, bob = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "person")))).item for n in ("Ada", "Bob")]
    first = await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows", {"since": 1})))
    assert first.created is True and (first.item.from_id, first.item.to_id) == (ada.id, bob.id)
    second = await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows", {"since": 2})))
    assert second.created is False and second.item.id == first.item.id
    assert second.item.metadata == {"since": 2} and second.item.created_at == first.item.created_at
    other = await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "admires")))
    assert other.created is True and other.item.id != first.item.id


async def test_a_relationship_with_an_unknown_end_is_not_found(store: Store) -> None:
    ada = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item
    with pytest.raises(NotFound) as raised:
        await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(999, ada.id, "knows")))
    assert raised.value.field == "fromId"
    with pytest.raises(NotFound) as raised:
        await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, 999, "knows")))
    assert raised.value.field == "toId"
    assert (await store.operations.counts())["relationships"] == 0


async def test_relationships_of_an_entity_follow_the_direction_asked(store: Store) -> None:
    ada, bob, cy = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "person")))).item for n in ("Ada", "Bob", "Cy")]
    out = (await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows")))).item
    into = (await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(cy.id, ada.id, "mentors")))).item
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(bob.id, cy.id, "knows")))
    assert await store.entities.relationships_of(ada.id, "out") == [out]
    assert await store.entities.relationships_of(ada.id, "in") == [into]
    assert await store.entities.relationships_of(ada.id, "both") == [out, into]
    assert await store.entities.relationships_of(999, "both") == []


async def test_deleting_a_relationship_returns_true_then_false(store: Store) -> None:
    ada, bob = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "person")))).item for n in ("Ada", "Bob")]
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows")))
    assert await store.uow.run(lambda tx: writes.unrelate(tx, ada.id, bob.id, "likes")) is False
    assert await store.uow.run(lambda tx: writes.unrelate(tx, ada.id, bob.id, "knows")) is True
    assert await store.uow.run(lambda tx: writes.unrelate(tx, ada.id, bob.id, "knows")) is False
    assert await store.entities.get(ada.id) is not None


# ---- summaries -----------------------------------------------------------------------------------


async def test_a_summary_can_be_added_and_read_back(store: Store) -> None:
    session = await a_session(store)
    e1, e2 = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a"), NewEpisode(session.id, "u", "a")]))
    added = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "they talked", e1.id, e2.id, 2, 40, {"by": "llm"})))
    assert (added.content, added.first_episode_id, added.last_episode_id) == ("they talked", e1.id, e2.id)
    assert (added.episode_count, added.token_count, added.metadata) == (2, 40, {"by": "llm"})
    assert await store.summaries.get(added.id) == added
    assert await store.summaries.get(999) is None
    assert await store.summaries.get_many([999, added.id]) == [added]


async def test_a_summary_for_an_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound) as raised:
        await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(999, "orphan")))
    assert raised.value.field == "sessionId"
    assert (await store.operations.counts())["summaries"] == 0


async def test_summaries_are_listed_oldest_first(store: Store) -> None:
    session, other = await a_session(store, "a"), await a_session(store, "b")
    made = [await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, f"part {i}"))) for i in range(3)]
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(other.id, "elsewhere")))
    assert await store.summaries.list(session.id) == made


async def test_deleting_a_summary_returns_true_then_false(store: Store) -> None:
    session = await a_session(store)
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "s")))
    assert await store.uow.run(lambda tx: writes.delete_summary(tx, summary.id)) is True
    assert await store.uow.run(lambda tx: writes.delete_summary(tx, summary.id)) is False
    assert await store.summaries.list(session.id) == []


# ---- operations ----------------------------------------------------------------------------------


async def test_counts_report_rows_per_table(store: Store) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a"), NewEpisode(session.id, "u", "a")]))
    a, b = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "t")))).item for n in ("A", "B")]
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(a.id, b.id, "r")))
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "s")))
    assert await store.operations.counts() == {
        "sessions": 1, "episodes": 2, "entities": 2, "relationships": 1, "summaries": 1,
        "embedding_outbox": 5,
    }


async def test_a_working_store_reports_itself_healthy(store: Store) -> None:
    assert await store.operations.health() is None


async def test_sizes_are_non_negative_byte_counts(store):
    session = await store.uow.run(lambda tx: writes.create_session(tx, "sized", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "words to index", "more words")]))
    sizes = await store.operations.sizes()
    assert all(isinstance(v, int) and v >= 0 for v in sizes.values())
    if sizes:  # a store with files names the database and its keyword indexes
        assert sizes["database"] > 0 and sizes["episodes_fts"] > 0


# ---- neighbours in session order -----------------------------------------------------------------


async def test_episode_neighbours_follow_session_order_nearest_first(store: Store) -> None:
    session, other = await a_session(store, "a"), await a_session(store, "b")
    # Inserted out of time order, interleaved with another session: order is (created_at, id).
    late = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"late{i}", "a", created_at=at(10 + i)) for i in range(2)]))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(other.id, "elsewhere", "a", created_at=at(5))]))
    early = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"early{i}", "a", created_at=at(i)) for i in range(3)]))
    ordered = [*early, *late]
    found = await store.episodes.neighbours([ordered[2].id, ordered[0].id, 999_999], 2)
    assert set(found) == {ordered[2].id, ordered[0].id}
    middle = found[ordered[2].id]
    assert list(middle.before) == [ordered[1].id, ordered[0].id]
    assert list(middle.after) == [ordered[3].id, ordered[4].id]
    first = found[ordered[0].id]
    assert list(first.before) == []
    assert list(first.after) == [ordered[1].id, ordered[2].id]
    assert await store.episodes.neighbours([ordered[2].id], 0) == {}


async def test_episodes_at_the_same_moment_are_ordered_by_id(store: Store) -> None:
    session = await a_session(store, "same")
    added = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a", created_at=at(1)) for i in range(3)]))
    found = await store.episodes.neighbours([added[1].id], 1)
    assert list(found[added[1].id].before) == [added[0].id]
    assert list(found[added[1].id].after) == [added[2].id]
