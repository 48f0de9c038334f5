"""EventService (domain.feed): the long-poll's rules over the in-memory store — a waiter gets the
next event, shutdown answers waiters, waiters are bounded, the cursor reports trimmed events."""

from __future__ import annotations

import asyncio

import pytest

from adapters.memory.store import MemoryStore
from domain import writes
from domain.errors import Busy, Invalid
from domain.feed import EventService, HistoryService, check_actor
from domain.limits import MAX_EVENT_WAITERS
from domain.models import NewEntity

GUARD = 20  # seconds: a hang guard only, never what a test measures


async def _entity(store: MemoryStore, name: str) -> int:
    return (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, "x")))).item.id


async def test_a_waiting_poll_gets_the_event_a_later_write_appends() -> None:
    store = MemoryStore()
    feed = EventService(store)
    waiting = asyncio.create_task(feed.after(0, 10, wait=GUARD))
    while feed.waiting == 0:  # the poll is parked before anything is written
        await asyncio.sleep(0)
    entity_id = await _entity(store, "Ada")
    feed.notify()
    batch = await asyncio.wait_for(waiting, GUARD)
    assert [(e.kind, e.record_id, e.op) for e in batch.events] == [("entities", entity_id, "created")]
    assert batch.next_after == batch.events[-1].seq and not batch.truncated
    assert feed.waiting == 0


async def test_closing_answers_the_waiting_polls_with_nothing() -> None:
    feed = EventService(MemoryStore())
    waiting = asyncio.create_task(feed.after(0, 10, wait=GUARD))
    while feed.waiting == 0:
        await asyncio.sleep(0)
    feed.close()
    batch = await asyncio.wait_for(waiting, GUARD)
    assert batch.events == [] and batch.next_after == 0
    assert (await asyncio.wait_for(feed.after(0, 10, wait=GUARD), GUARD)).events == []  # no new waits either


async def test_beyond_the_waiter_bound_a_poll_is_refused_at_once_with_when_to_retry() -> None:
    feed = EventService(MemoryStore())
    feed.waiting = MAX_EVENT_WAITERS
    with pytest.raises(Busy) as refused:
        await asyncio.wait_for(feed.after(0, 10, wait=GUARD), GUARD)
    assert refused.value.retry_after >= 1


async def test_beyond_the_waiter_bound_a_poll_without_wait_still_answers() -> None:
    store = MemoryStore()
    await _entity(store, "Ada")
    feed = EventService(store)
    feed.waiting = MAX_EVENT_WAITERS
    assert len((await feed.after(0, 10)).events) == 1


async def test_a_cursor_beyond_the_newest_event_is_refused_naming_after() -> None:
    store = MemoryStore()
    await _entity(store, "Ada")
    feed = EventService(store)
    assert (await feed.after(1, 10)).events == []  # the head itself is a fine cursor
    with pytest.raises(Invalid) as refused:
        await feed.after(2, 10)
    assert refused.value.field == "after"


async def test_a_reader_behind_the_retention_is_told_it_missed_events() -> None:
    store = MemoryStore(event_retention=100)
    for n in range(300):
        await _entity(store, f"e{n}")
    feed = EventService(store)
    behind = await feed.after(0, 10)
    assert behind.truncated and behind.events[0].seq > 1
    current = await feed.after(behind.next_after, 10)
    assert not current.truncated


@pytest.mark.parametrize(("call", "field"), [
    (lambda f: f.after(-1), "after"), (lambda f: f.after(0, 0), "limit"), (lambda f: f.after(0, 1001), "limit"),
    (lambda f: f.after(0, 10, 31), "wait"), (lambda f: f.after(0, 10, -1), "wait"),
])
async def test_bad_feed_arguments_name_their_field(call, field) -> None:
    with pytest.raises(Invalid) as caught:
        await call(EventService(MemoryStore()))
    assert caught.value.field == field


async def test_history_refuses_an_unknown_kind() -> None:
    with pytest.raises(Invalid) as caught:
        await HistoryService(MemoryStore()).of_record("sessions", 1)
    assert caught.value.field == "kind"


@pytest.mark.parametrize("actor", ["x" * 201, "tab\there", "new\nline"])
def test_an_actor_must_be_short_printable_text(actor) -> None:
    with pytest.raises(Invalid):
        check_actor(actor)


def test_an_empty_actor_is_none() -> None:
    assert check_actor("") is None and check_actor(None) is None and check_actor("agent:7") == "agent:7"
