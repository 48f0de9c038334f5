"""The conversation ranker and its time words, on hand-built requests with session neighbours."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from adapters.rankers.builtin import WeightedRanker
from adapters.rankers.conversation import ConversationRanker
from adapters.rankers.temporal import asks_about_time, named_period, says_when
from domain.models import Episode
from domain.ranking import Candidate, Context, Key, LegHit, RankerConfig, RankingRequest

NOW = datetime(2025, 6, 1, tzinfo=UTC)
FILLER: Key = ("episodes", 99)


def ep(n: int) -> Key:
    return ("episodes", n)


def cand(n: int, text: str = "", when: datetime = NOW) -> Candidate:
    return Candidate(ep(n), Episode(n, 1, text or f"user {n}", "ok", None, {}, when.isoformat()), when)


def req(query: str, candidates: Sequence[Candidate], keyword: Sequence[int], vector: Sequence[int] = (),
        neighbours: dict[Key, Context] | None = None, limit: int = 10) -> RankingRequest:
    def leg(ids: Sequence[int]) -> list[LegHit]:
        # Close scores, then a far weaker filler hit (FILLER), so standardising keeps the real hits
        # within a fraction of a deviation of each other, as in a real leg's head.
        hits = [LegHit(ep(i), 10.0 - 0.1 * rank, rank) for rank, i in enumerate(ids, start=1)]
        return [*hits, LegHit(FILLER, 0.0, len(hits) + 1)] if hits else []

    everything = {c.key: c for c in candidates} | {FILLER: cand(FILLER[1], "filler")}
    return RankingRequest(query, None, leg(vector), leg(keyword), everything, limit, NOW, neighbours or {})


def chain(*ids: int) -> dict[Key, Context]:
    """Episodes ``ids`` in session order, each knowing the one before and after it."""
    out = {}
    for at, i in enumerate(ids):
        out[ep(i)] = Context(before=tuple(ep(j) for j in ids[max(at - 1, 0):at]),
                             after=tuple(ep(j) for j in ids[at + 1:at + 2]))
    return out


def ranked(config: RankerConfig, request: RankingRequest) -> list[Key]:
    """The order, without the filler hit."""
    return [hit.key for hit in ConversationRanker(config).rank(request) if hit.key != FILLER]


def test_the_turn_after_a_strong_hit_comes_along_though_no_leg_found_it() -> None:
    # 1 is the strong hit of the stronger leg; 2 (its reply) was found by no leg; 5 and 6 are hits
    # of the weaker vector leg only.
    candidates = [cand(i) for i in (1, 2, 5, 6)]
    request = req("puppy name", candidates, keyword=[1], vector=[5, 6], neighbours=chain(1, 2))
    assert ranked(RankerConfig(), request) == [ep(1), ep(2), ep(5), ep(6)]
    assert ranked(RankerConfig(context_weight=0.0), request) == [ep(1), ep(5), ep(6)]


def test_lifts_do_not_chain_along_a_session() -> None:
    # 2 inherits from 1, but 3 (next to 2) inherits nothing: only leg scores are passed on.
    candidates = [cand(i) for i in (1, 2, 3)]
    request = req("q", candidates, keyword=[1], neighbours=chain(1, 2, 3))
    assert ranked(RankerConfig(), request) == [ep(1), ep(2)]


def test_without_context_and_time_weights_it_is_the_weighted_order() -> None:
    candidates = [cand(i, "yesterday we went out") for i in range(1, 7)]
    request = req("when did we go out", candidates, keyword=[3, 1, 5], vector=[2, 4, 1, 6], neighbours=chain(*range(1, 7)))
    config = RankerConfig(context_weight=0.0, time_weight=0.0)
    assert ranked(config, request) == [h.key for h in WeightedRanker(config).rank(request) if h.key != FILLER]


def test_a_when_question_lifts_the_turn_that_says_when() -> None:
    candidates = [cand(1, "I went to the support group, it was powerful"),
                  cand(2, "I went to the support group yesterday")]
    question = req("When did she go to the support group?", candidates, keyword=[1, 2])
    assert ranked(RankerConfig(), question) == [ep(2), ep(1)]
    statement = req("she went to the support group", candidates, keyword=[1, 2])
    assert ranked(RankerConfig(), statement) == [ep(1), ep(2)]


def test_a_question_naming_a_month_lifts_memories_from_then() -> None:
    may, june = datetime(2025, 5, 10, tzinfo=UTC), datetime(2025, 6, 10, tzinfo=UTC)
    candidates = [cand(1, "painted a sunrise", june), cand(2, "painted a sunrise", may)]
    request = req("what did she paint in May 2025", candidates, keyword=[1, 2])
    assert ranked(RankerConfig(), request) == [ep(2), ep(1)]


def test_limit_zero_answers_nothing_and_empty_legs_answer_nothing() -> None:
    candidates = [cand(1)]
    assert ranked(RankerConfig(), req("when", candidates, keyword=[1], limit=0)) == []
    assert ranked(RankerConfig(), req("when", candidates, keyword=[])) == []


@pytest.mark.parametrize(("text", "dated"), [
    ("I ran a charity race last Saturday", True),
    ("we met yesterday", True),
    ("I'm going to a conference this month", True),
    ("back in 2019 I lived abroad", True),
    ("it was in August", True),
    ("last of the cookies", False),
    ("you may like it", False),
    ("I love painting sunsets", False),
])
def test_says_when(text: str, dated: bool) -> None:
    assert says_when(text) is dated


@pytest.mark.parametrize(("query", "asks"), [
    ("When did Caroline go to the LGBTQ support group?", True),
    ("How long ago was her birthday?", True),
    ("What year did he move?", True),
    ("What did Caroline research?", False),
])
def test_asks_about_time(query: str, asks: bool) -> None:
    assert asks_about_time(query) is asks


@pytest.mark.parametrize(("query", "period"), [
    ("what happened in May 2023", (5, 2023)),
    ("what did she do last May", (5, None)),
    ("may I ask what she painted", (None, None)),
    ("plans for July", (7, None)),
    ("what changed in 2022", (None, 2022)),
])
def test_named_period(query: str, period: tuple[int | None, int | None]) -> None:
    assert named_period(query) == period


def test_dates_are_compared_in_utc() -> None:
    late = datetime(2025, 5, 31, 23, 30, tzinfo=UTC) + timedelta(hours=1)  # 1 June in UTC
    candidates = [cand(1, "x", late), cand(2, "x", datetime(2025, 5, 2, tzinfo=UTC))]
    assert ranked(RankerConfig(), req("what in May 2025", candidates, keyword=[1, 2])) == [ep(2), ep(1)]
