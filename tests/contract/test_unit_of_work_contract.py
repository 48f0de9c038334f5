"""The ``UnitOfWork`` port over every adapter: a unit commits everything it wrote, or nothing."""

from __future__ import annotations

import asyncio

import pytest

from domain import writes
from domain.errors import NotFound
from domain.models import NewEpisode, NewSummary
from ports.store import Store
from tests.contract.store_helpers import a_session, jobs


class Boom(Exception):
    pass


async def test_a_unit_returns_what_its_function_returns_and_commits_it(store: Store) -> None:
    session = await a_session(store)
    episodes = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
    assert await store.episodes.get(episodes[0].id) == episodes[0]
    assert await jobs(store) == [("episodes", "upsert", episodes[0].id)]


async def test_a_unit_that_raises_leaves_neither_its_records_nor_its_jobs(store: Store) -> None:
    session = await a_session(store)

    def half_done(tx):
        tx.sessions.create("second", {})
        writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")])
        writes.add_summary(tx, NewSummary(session.id, "s"))
        raise Boom

    with pytest.raises(Boom):
        await store.uow.run(half_done)
    assert (await store.episodes.list(session.id, 10, 0)).total == 0
    assert await store.summaries.list(session.id) == []
    assert await store.sessions.by_external_id("second") is None
    assert await jobs(store) == []
    assert (await store.operations.counts())["embedding_outbox"] == 0


async def test_a_failing_unit_leaves_the_units_around_it_committed(store: Store) -> None:
    session = await a_session(store)
    good = [NewEpisode(session.id, f"u{i}", "a") for i in range(3)]
    outcomes = await asyncio.gather(
        store.uow.run(lambda tx: writes.add_episodes(tx, good[:1])),
        store.uow.run(lambda tx: writes.add_episodes(tx, [good[1], NewEpisode(999, "u", "a")])),
        store.uow.run(lambda tx: writes.add_episodes(tx, good[2:])),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], NotFound) and outcomes[1].field == "sessionId"
    listed = (await store.episodes.list(session.id, 10, 0)).items
    assert [e.user_message for e in listed] == ["u0", "u2"]
    assert sorted(ref for _c, _op, ref in await jobs(store)) == sorted(e.id for e in listed)
