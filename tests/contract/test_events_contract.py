"""The change feed (ports.events) over every store adapter: appended in the transaction of the
change, in order, ids only, bounded by the store's retention."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.contract.conftest import STORE_KINDS, open_store
from domain import writes
from domain.models import EpisodeChanges, NewEntity, NewEpisode, NewRelationship
from domain.outbox import OutboxJob
from ports.store import Store
from tests.contract.store_helpers import FAR_FUTURE, a_session


def ops(events) -> list[tuple[str, int, str]]:
    return [(e.kind, e.record_id, e.op) for e in events]


async def test_creates_updates_and_deletes_are_events_in_order(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "a", "b")]))
    await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(ai_response="c")))
    await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id))
    await store.uow.run(lambda tx: writes.delete_session(tx, session.id))
    events = await store.events.after(0, 100)
    assert ops(events) == [("sessions", session.id, "created"), ("episodes", episode.id, "created"),
                           ("episodes", episode.id, "updated"), ("episodes", episode.id, "deleted"),
                           ("sessions", session.id, "deleted")]
    assert [e.session_id for e in events] == [session.id] * 5
    assert [e.seq for e in events] == sorted({e.seq for e in events})


async def test_after_is_a_cursor(store: Store) -> None:
    for name in "abcde":
        await store.uow.run(lambda tx, n=name: writes.upsert_entity(tx, NewEntity(n, "x")))
    first = await store.events.after(0, 2)
    rest = await store.events.after(first[-1].seq, 10)
    assert len(first) == 2 and len(rest) == 3 and rest[0].seq > first[-1].seq
    assert await store.events.after(rest[-1].seq, 10) == []
    assert await store.events.bounds() == (first[0].seq, rest[-1].seq)


async def test_an_empty_feed_has_bounds_zero(store: Store) -> None:
    assert await store.events.bounds() == (0, 0)
    assert await store.events.after(0, 10) == []


async def test_relationship_changes_are_events(store: Store) -> None:
    a = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("A", "x")))).item
    b = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("B", "x")))).item
    edge = (await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(a.id, b.id, "knows")))).item
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(a.id, b.id, "knows", {"v": 2})))
    await store.uow.run(lambda tx: writes.unrelate(tx, a.id, b.id, "knows"))
    assert ops(await store.events.after(0, 100))[2:] == [
        ("relationships", edge.id, "created"), ("relationships", edge.id, "updated"), ("relationships", edge.id, "deleted")]


async def test_a_completed_upsert_job_is_an_embedded_event_and_the_job_goes(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "a", "b")]))
    jobs: list[OutboxJob] = await store.outbox.due(10, FAR_FUTURE)
    await store.uow.run(lambda tx: writes.jobs_completed(tx, jobs))
    assert (await store.outbox.backlog()).pending == 0
    assert ops(await store.events.after(0, 100))[-1] == ("episodes", episode.id, "embedded")


async def test_a_failed_unit_leaves_no_event(store: Store) -> None:
    def fails(tx):
        writes.upsert_entity(tx, NewEntity("A", "x"))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await store.uow.run(fails)
    assert await store.events.after(0, 10) == []


@pytest.fixture(params=STORE_KINDS)
async def small_feed(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A store that keeps only the newest 100 events."""
    opened = open_store(request.param, request, event_retention=100)
    yield opened
    await opened.operations.close()


async def test_retention_bounds_the_feed_and_seqs_are_never_reused(small_feed: Store) -> None:
    for n in range(600):
        await small_feed.uow.run(lambda tx, n=n: tx.events.append("entities", n, "created", "2025-01-01T00:00:00.000Z", None, None))
    low, high = await small_feed.events.bounds()
    assert high == 600 and high - low + 1 <= 100 + 255  # trimmed every 256 appends
    assert await small_feed.uow.run(lambda tx: tx.events.trim(10)) > 0
    low, high = await small_feed.events.bounds()
    assert (low, high) == (591, 600)
    seq = await small_feed.uow.run(lambda tx: tx.events.append("entities", 1, "updated", "2025-01-01T00:00:00.000Z", None, None))
    assert seq == 601
