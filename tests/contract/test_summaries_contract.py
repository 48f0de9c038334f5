"""The ``Summaries`` port and ``SummaryWrites``, over every adapter.
"""

from __future__ import annotations

import pytest

from domain import writes
from domain.errors import NotFound
from domain.models import NewEpisode, NewSummary
from ports.store import Store
from tests.contract.store_helpers import a_session


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
