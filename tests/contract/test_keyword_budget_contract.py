"""The keyword budget (``domain.keywords.within_budget``) over every ``KeywordIndex`` adapter.

A search ranks at most ``query.budget`` matches: an ``any`` query leaves out its most frequent
terms, and an unscoped query whose rarest term alone is over the budget ranks only its newest
matches. Budgets here are tiny so a handful of records crosses them.
"""

from __future__ import annotations

from dataclasses import replace

from domain import writes
from domain.keywords import KeywordQuery, plain_query, recall_query
from domain.models import NewEpisode
from ports.store import Store
from tests.contract.store_helpers import a_session


async def _episodes(store: Store, session_id: int, texts: list[str]) -> list[int]:
    added = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session_id, t, "noted") for t in texts]))
    return [e.id for e in added]


async def _found(store: Store, query: KeywordQuery, session_id: int | None = None) -> set[int]:
    return {h.item.id for h in await store.keywords.search("episodes", query, 50, session_id=session_id)}


async def test_an_any_query_within_its_budget_searches_every_term(store: Store) -> None:
    session = await a_session(store)
    walnut, hazel, almond = await _episodes(store, session.id, ["walnut", "hazel", "almond"])
    query = replace(plain_query("walnut hazel almond", "any"), budget=3)
    assert await _found(store, query) == {walnut, hazel, almond}


async def test_an_any_query_over_its_budget_leaves_out_its_most_frequent_terms(store: Store) -> None:
    session = await a_session(store)
    rare, *mid = await _episodes(store, session.id, ["quokka", "wombat", "wombat"])
    await _episodes(store, session.id, ["kangaroo"] * 4)
    query = replace(plain_query("kangaroo wombat quokka", "any"), budget=3)  # 1 + 2 fit; 4 more do not
    assert await _found(store, query) == {rare, *mid}
    unbounded = replace(query, budget=None)
    assert len(await _found(store, unbounded)) == 7


async def test_the_rarest_term_is_kept_even_alone_over_the_budget(store: Store) -> None:
    session = await a_session(store)
    heron = await _episodes(store, session.id, ["heron"] * 3)
    await _episodes(store, session.id, ["egret"] * 5)
    query = replace(recall_query("egret heron"), budget=5)  # heron 3 kept; egret 5 more would be 8
    assert await _found(store, query) == set(heron)


async def test_an_unscoped_query_whose_rarest_term_is_over_the_budget_ranks_its_newest_matches(store: Store) -> None:
    session = await a_session(store)
    lantern = await _episodes(store, session.id, ["lantern"] * 5)
    for mode in ("all", "any"):
        assert await _found(store, replace(plain_query("lantern", mode), budget=2)) == set(lantern[-2:])
    both = replace(plain_query("lantern", "any"), terms=("lantern", "lantern"), budget=2)
    assert await _found(store, both) == set(lantern[-2:])


async def test_an_all_query_counts_its_matches_as_a_whole(store: Store) -> None:
    session = await a_session(store)
    pair = await _episodes(store, session.id, ["otter beaver", "otter beaver"])
    await _episodes(store, session.id, ["otter"] * 3 + ["beaver"] * 3)
    assert await _found(store, replace(plain_query("otter beaver", "all"), budget=2)) == set(pair)
    assert await _found(store, replace(plain_query("otter beaver", "all"), budget=1)) == set(pair[-1:])


async def test_a_scoped_search_is_never_cut_to_the_newest_matches(store: Store) -> None:
    older, newer = await a_session(store, "older"), await a_session(store, "newer")
    mine = await _episodes(store, older.id, ["compass"] * 3)
    theirs = await _episodes(store, newer.id, ["compass"] * 3)
    query = replace(plain_query("compass"), budget=2)
    assert await _found(store, query) == set(theirs[-2:])
    assert await _found(store, query, session_id=older.id) == set(mine)


async def test_a_scoped_search_still_leaves_out_the_most_frequent_terms(store: Store) -> None:
    session = await a_session(store)
    rare = await _episodes(store, session.id, ["falcon"])
    await _episodes(store, session.id, ["sparrow"] * 3)
    query = replace(recall_query("sparrow falcon"), budget=2)
    assert await _found(store, query, session_id=session.id) == set(rare)
