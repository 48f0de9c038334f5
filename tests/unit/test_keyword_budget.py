"""The keyword budget rule (``domain.keywords.within_budget``), on its own: counts in, plan out."""

from __future__ import annotations

from domain.keywords import MATCH_BUDGET, KeywordQuery, counted, plain_query, recall_query, within_budget


def _plan(terms: dict[str, int], budget: int, scoped: bool = False, mode: str = "any"):
    query = KeywordQuery(tuple(terms), mode, budget=budget)  # type: ignore[arg-type]
    counts = {part: terms[part.terms[0]] if len(part.terms) == 1 else sum(terms.values()) for part in counted(query)}
    return within_budget(query, counts, scoped)


def test_every_query_a_user_or_the_hybrid_leg_makes_carries_the_default_budget() -> None:
    assert plain_query("a b").budget == recall_query("a b").budget == plain_query("a", "fts").budget == MATCH_BUDGET


def test_an_any_query_needs_the_count_of_each_term_and_any_other_query_its_own() -> None:
    query = KeywordQuery(("a", "b"), "any", budget=10)
    assert counted(query) == (KeywordQuery(("a",), "all", budget=10), KeywordQuery(("b",), "all", budget=10))
    for single in (KeywordQuery(("a", "b"), "all", budget=10), KeywordQuery(("a",), "any", budget=10)):
        assert counted(single) == (single,)
    assert counted(KeywordQuery(("a", "b"), "any", budget=None)) == ()
    assert counted(KeywordQuery((), "any", budget=10)) == ()


def test_terms_are_kept_from_the_rarest_up_while_their_summed_counts_fit() -> None:
    plan = _plan({"common": 900, "rare": 10, "mid": 80, "other": 95}, budget=200)
    assert plan.query.terms == ("rare", "mid", "other")  # in the query's order
    assert plan.dropped == ("common",) and plan.newest is None and plan.bounded


def test_a_query_within_its_budget_is_left_as_it_is() -> None:
    plan = _plan({"a": 5, "b": 5}, budget=10)
    assert plan.query.terms == ("a", "b") and not plan.bounded


def test_the_rarest_term_alone_over_the_budget_is_kept_and_its_newest_matches_ranked() -> None:
    plan = _plan({"x": 700, "y": 300}, budget=200)
    assert plan.query.terms == ("y",) and plan.dropped == ("x",) and plan.newest == 200
    assert _plan({"x": 700}, budget=200).newest == 200
    assert _plan({"x": 70, "y": 300}, budget=200, mode="all").newest == 200  # counted as a whole: 370


def test_a_scoped_search_drops_terms_but_is_never_cut_to_the_newest() -> None:
    plan = _plan({"x": 700, "y": 300}, budget=200, scoped=True)
    assert plan.query.terms == ("y",) and plan.newest is None


def test_equal_counts_keep_the_earlier_term() -> None:
    assert _plan({"first": 60, "second": 60}, budget=100).query.terms == ("first",)


def test_no_budget_means_no_rule() -> None:
    query = KeywordQuery(("a", "b"), "any", budget=None)
    assert within_budget(query, {}).query is query


def test_a_query_whose_parts_cannot_together_pass_the_budget_needs_no_count() -> None:
    import itertools
    import random

    from domain.keywords import KeywordPlan, fits_whatever_it_matches

    rng = random.Random(15)
    queries = [KeywordQuery(terms, mode, budget=12)  # type: ignore[arg-type]
               for mode in ("any", "all") for n in (1, 2, 3) for terms in itertools.permutations("abc", n)]
    queries.append(KeywordQuery(("a",), "fts", raw="a OR b", budget=12))
    for query in queries:
        parts = counted(query)
        for most in range(0, 14):
            if not fits_whatever_it_matches(query, most):
                assert len(parts) * most > 12
                continue
            for _ in range(30):  # whatever the counts within ``most``, the rule keeps the query whole
                counts = {part: rng.randint(0, most) for part in parts}
                assert within_budget(query, counts) == within_budget(query, counts, scoped=True) == KeywordPlan(query)
    # one term: up to the budget; three terms: a third of it
    assert fits_whatever_it_matches(KeywordQuery(("a",), "all", budget=12), 12)
    assert not fits_whatever_it_matches(KeywordQuery(("a",), "all", budget=12), 13)
    assert fits_whatever_it_matches(KeywordQuery(("a", "b", "c"), "any", budget=12), 4)
    assert not fits_whatever_it_matches(KeywordQuery(("a", "b", "c"), "any", budget=12), 5)
    assert fits_whatever_it_matches(KeywordQuery(("a", "b"), "any", budget=None), 10**9)  # no budget: nothing to count
