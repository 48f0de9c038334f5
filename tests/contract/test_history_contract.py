"""History (ports.history) over every store adapter: each update and delete of an episode, entity,
relationship or summary appends a version in the transaction of the change (domain.writes)."""

from __future__ import annotations

import pytest

from domain import changes, writes
from domain.models import EpisodeChanges, NewEntity, NewEpisode, NewRelationship, NewSummary
from ports.store import Store
from tests.contract.store_helpers import a_session


async def run(store: Store, fn):
    return await store.uow.run(fn)


async def an_episode(store: Store, session_id: int):
    return (await run(store, lambda tx: writes.add_episodes(tx, [NewEpisode(session_id, "hi", "hello", 3, {"k": 1})])))[0]


async def test_an_update_appends_a_version_with_before_after_and_the_changed_fields(store: Store) -> None:
    session = await a_session(store)
    episode = await an_episode(store, session.id)
    await run(store, lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(user_message="hey")))
    [version] = await store.history.of_record("episodes", episode.id, 0, 10)
    assert (version.kind, version.record_id, version.op, version.session_id) == ("episodes", episode.id, "updated", session.id)
    assert version.before["user_message"] == "hi" and version.after["user_message"] == "hey"
    assert version.before["metadata"] == {"k": 1} == version.after["metadata"]
    assert version.changed == ["user_message"]
    assert version.actor is None


async def test_a_delete_appends_a_version_that_outlives_the_record(store: Store) -> None:
    session = await a_session(store)
    summary = await run(store, lambda tx: writes.add_summary(tx, NewSummary(session.id, "the gist")))
    assert await run(store, lambda tx: writes.delete_summary(tx, summary.id))
    assert await store.summaries.get(summary.id) is None
    [version] = await store.history.of_record("summaries", summary.id, 0, 10)
    assert version.op == "deleted" and version.after is None and version.before["content"] == "the gist"


async def test_creating_appends_no_version_and_unknown_records_have_none(store: Store) -> None:
    session = await a_session(store)
    episode = await an_episode(store, session.id)
    assert await store.history.of_record("episodes", episode.id, 0, 10) == []
    assert await store.history.of_record("episodes", 999, 0, 10) == []


async def test_versions_come_oldest_first_and_page_by_version(store: Store) -> None:
    entity = (await run(store, lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "v0")))).item
    for n in range(1, 5):
        await run(store, lambda tx, n=n: writes.upsert_entity(tx, NewEntity("Ada", "person", f"v{n}")))
    versions = await store.history.of_record("entities", entity.id, 0, 10)
    assert [v.after["notes"] for v in versions] == ["v1", "v2", "v3", "v4"]
    assert [v.version for v in versions] == sorted(v.version for v in versions)
    page = await store.history.of_record("entities", entity.id, versions[1].version, 2)
    assert [v.after["notes"] for v in page] == ["v3", "v4"]


async def test_the_actor_of_the_calling_context_is_recorded(store: Store) -> None:
    entity = (await run(store, lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item
    token = changes.actor.set("agent-7")
    try:
        await run(store, lambda tx: writes.delete_entity(tx, entity.id))
    finally:
        changes.actor.reset(token)
    [version] = await store.history.of_record("entities", entity.id, 0, 10)
    assert version.actor == "agent-7"


async def test_deleting_an_entity_records_the_deletion_of_its_relationships(store: Store) -> None:
    a = (await run(store, lambda tx: writes.upsert_entity(tx, NewEntity("A", "x")))).item
    b = (await run(store, lambda tx: writes.upsert_entity(tx, NewEntity("B", "x")))).item
    edge = (await run(store, lambda tx: writes.relate(tx, NewRelationship(a.id, b.id, "knows")))).item
    await run(store, lambda tx: writes.delete_entity(tx, b.id))
    [version] = await store.history.of_record("relationships", edge.id, 0, 10)
    assert version.op == "deleted" and version.before["label"] == "knows"


async def test_a_unit_that_fails_leaves_no_version(store: Store) -> None:
    session = await a_session(store)
    episode = await an_episode(store, session.id)

    def fails(tx):
        writes.update_episode(tx, episode.id, EpisodeChanges(ai_response="changed"))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await run(store, fails)
    assert await store.history.of_record("episodes", episode.id, 0, 10) == []


async def test_deleting_a_session_forgets_its_records_history(store: Store) -> None:
    kept, gone = await a_session(store, "kept"), await a_session(store, "gone")
    kept_episode, gone_episode = await an_episode(store, kept.id), await an_episode(store, gone.id)
    for episode in (kept_episode, gone_episode):
        await run(store, lambda tx, e=episode: writes.update_episode(tx, e.id, EpisodeChanges(token_count=9)))
    await run(store, lambda tx: writes.delete_session(tx, gone.id))
    assert await store.history.of_record("episodes", gone_episode.id, 0, 10) == []
    assert len(await store.history.of_record("episodes", kept_episode.id, 0, 10)) == 1


async def test_history_can_be_forgotten_by_record_and_by_user(store: Store) -> None:
    def append(tx, record_id: int, user_id: str | None):
        return tx.history.append("entities", record_id, "updated", "2025-01-01T00:00:00.000Z", None,
                                 {"notes": "a"}, {"notes": "b"}, ["notes"], None, user_id)

    await run(store, lambda tx: [append(tx, 1, "u1"), append(tx, 2, "u1"), append(tx, 3, "u2"), append(tx, 4, None)])
    assert await run(store, lambda tx: writes.forget_history_of_user(tx, "u1")) == 2
    assert await run(store, lambda tx: writes.forget_history(tx, "entities", [3, 99])) == 1
    remaining = [r for r in range(1, 5) if await store.history.of_record("entities", r, 0, 10)]
    assert remaining == [4]
