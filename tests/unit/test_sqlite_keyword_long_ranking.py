"""A keyword search whose counts say its ranking is long goes to a reader thread at once (which
plans again, remembering its counts); it is not first tried on the event loop, stopped at the step
budget and run again.
A search that ranks few matches stays on the loop. Either way the answer is the same.

Real SQLite file; a budget small enough that 1,000 episodes are counted (``max(id)`` above it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.sqlite import keyword_index
from adapters.sqlite.store import SqliteStore
from domain import writes
from domain.keywords import KeywordQuery, within_budget
from domain.models import NewEpisode

EPISODES = 1_000


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore.open(str(tmp_path / "long.db"))
    session = await store.uow.run(lambda tx: writes.create_session(tx, "long-ranking", {}))
    # every episode says "apple"; one in 100 also says "quince"
    batch = [NewEpisode(session_id=session.id, user_message=f"apple number {n}" + (" quince" if n % 100 == 0 else ""),
                        ai_response="noted") for n in range(EPISODES)]
    await store.uow.run(lambda tx: writes.add_episodes(tx, batch))
    yield store
    store.database.close()


@pytest.fixture
def pooled(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> list:
    """Every read the store hands to a reader thread, in order."""
    handed: list = []
    read = store.database.read

    async def counting_read(fn):
        handed.append(fn)
        return await read(fn)

    monkeypatch.setattr(store.database, "read", counting_read)
    return handed


def _interrupted(store: SqliteStore) -> float:
    """The overflow rate of unscoped episode searches: above 0 once one was stopped at its budget."""
    return store.database._overflows.rate(("episodes", False))


async def test_a_long_ranking_goes_to_a_reader_at_once_and_answers_as_the_loop_would(
        store: SqliteStore, pooled: list, monkeypatch: pytest.MonkeyPatch) -> None:
    query = KeywordQuery(("apple",), "all", budget=900)  # 1,000 matches: the newest 900 are ranked
    hits = await store.keywords.search("episodes", query, 10)
    assert len(hits) == 10 and all("apple" in h.item.user_message for h in hits)
    assert len(pooled) == 1  # on a reader thread, once
    assert _interrupted(store) == 0.0  # never stopped at the step budget on the loop first

    # The same search with the threshold out of reach: tried on the loop, stopped, run again.
    monkeypatch.setattr(keyword_index, "LONG_RANKING", 10**9)
    pooled.clear()
    again = await store.keywords.search("episodes", query, 10)
    assert [(h.item.id, h.score) for h in again] == [(h.item.id, h.score) for h in hits]
    assert len(pooled) == 1 and _interrupted(store) > 0.0


async def test_a_short_ranking_stays_on_the_loop(store: SqliteStore, pooled: list) -> None:
    hits = await store.keywords.search("episodes", KeywordQuery(("quince",), "all", budget=900), 20)
    assert sorted(h.item.user_message for h in hits) == sorted(f"apple number {n} quince" for n in range(0, EPISODES, 100))
    assert pooled == [] and _interrupted(store) == 0.0


def test_a_plan_says_how_many_matches_it_ranks() -> None:
    one = KeywordQuery(("a",), "all", budget=10)
    assert within_budget(one, {one: 4}).matches == 4
    assert within_budget(one, {one: 11}).matches == 10  # cut to the newest 10
    assert within_budget(one, {one: 11}, scoped=True).matches == 11  # never cut: as many as counted
    both = KeywordQuery(("a", "b", "c"), "any", budget=10)
    counts = {KeywordQuery((t,), "all", budget=10): n for t, n in (("a", 3), ("b", 5), ("c", 9))}
    plan = within_budget(both, counts)
    assert plan.dropped == ("c",) and plan.matches == 8
    assert within_budget(KeywordQuery(("a",), budget=None), {}).matches is None  # no budget: nothing counted


async def test_the_remembered_highest_id_is_asked_again_after_a_write(tmp_path: Path) -> None:
    # The plan remembers each table's max(id) with its counts, per connection, until a write: a
    # store that fitted its budget and then grew past it must count and rank only the newest matches.
    store = SqliteStore.open(str(tmp_path / "grows.db"))
    try:
        session = await store.uow.run(lambda tx: writes.create_session(tx, "grows", {}))

        async def add(n: int) -> None:
            batch = [NewEpisode(session_id=session.id, user_message=f"pear {i}", ai_response="ok") for i in range(n)]
            await store.uow.run(lambda tx: writes.add_episodes(tx, batch))

        query = KeywordQuery(("pear",), "all", budget=5)
        await add(3)
        assert len(await store.keywords.search("episodes", query, 20)) == 3  # max(id) 3: all ranked, uncounted
        assert len(await store.keywords.search("episodes", query, 20)) == 3  # the same, from the memo
        await add(10)
        hits = await store.keywords.search("episodes", query, 20)
        assert sorted(h.item.id for h in hits) == list(range(9, 14))  # 13 matches: the newest 5 ranked
    finally:
        store.database.close()
