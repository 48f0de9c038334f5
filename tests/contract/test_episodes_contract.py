"""The ``Episodes`` port and ``EpisodeWrites`` (through the unit of work), over every adapter.
"""

from __future__ import annotations

import pytest

from domain import writes
from domain.errors import NotFound
from domain.models import EpisodeChanges, NewEpisode
from ports.store import Store
from tests.contract.store_helpers import a_session, at


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


async def test_recent_episodes_are_the_newest_first(store: Store) -> None:
    session, other = await a_session(store, "a"), await a_session(store, "b")
    added = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a", created_at=at(i)) for i in range(5)]))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(other.id, "newer but elsewhere", "a", created_at=at(99))]))
    recent = await store.episodes.recent(session.id, 3)
    assert [e.id for e in recent] == [added[4].id, added[3].id, added[2].id]


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
