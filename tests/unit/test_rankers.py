"""The built-in rankers on hand-built candidate lists: fusion math, ties, empty legs, decay, diversity."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from adapters.rankers import plugin as builtin_plugin
from adapters.rankers.builtin import (
    KeywordRanker,
    MmrRanker,
    RecencyRanker,
    RrfRanker,
    VectorRanker,
    WeightedRanker,
)
from domain.errors import Invalid
from domain.models import Episode
from domain.ranking import Candidate, Key, LegHit, RankedHit, RankerConfig, RankingRequest

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def ep(number: int) -> Key:
    return ("episodes", number)


def leg(*keys: Key, scores: Sequence[float] | None = None) -> list[LegHit]:
    """A leg answering ``keys`` best first; scores default to 1.0, 0.9, 0.8, ..."""
    values = scores if scores is not None else [1.0 - 0.1 * index for index in range(len(keys))]
    return [LegHit(key=key, score=score, rank=rank) for rank, (key, score) in enumerate(zip(keys, values), start=1)]


def candidate(key: Key, *, age_days: float = 0.0, vector: tuple[float, ...] | None = None) -> Candidate:
    created = NOW - timedelta(days=age_days)
    item = Episode(key[1], 1, f"user {key[1]}", f"assistant {key[1]}", None, {}, created.isoformat())
    return Candidate(key=key, item=item, created_at=created, vector=vector)


def request(
    *,
    vector_hits: Sequence[LegHit] = (),
    keyword_hits: Sequence[LegHit] = (),
    candidates: Sequence[Candidate] | None = None,
    limit: int = 10,
    query_vector: tuple[float, ...] | None = None,
) -> RankingRequest:
    if candidates is None:
        keys = sorted({hit.key for hit in [*vector_hits, *keyword_hits]})
        candidates = [candidate(key) for key in keys]
    return RankingRequest(
        query="where did we go on holiday",
        query_vector=query_vector,
        vector_hits=vector_hits,
        keyword_hits=keyword_hits,
        candidates={item.key: item for item in candidates},
        limit=limit,
        now=NOW,
    )


def keys(hits: Sequence[RankedHit]) -> list[Key]:
    return [hit.key for hit in hits]


# ---- rrf ----------------------------------------------------------------------------------------


def test_rrf_sums_one_over_k_plus_rank_across_legs() -> None:
    hits = RrfRanker(RankerConfig(rrf_k=60, keyword_weight=1.0)).rank(
        request(vector_hits=leg(ep(1), ep(2)), keyword_hits=leg(ep(2), ep(3)))
    )
    assert keys(hits) == [ep(2), ep(1), ep(3)]
    scores = {hit.key: hit.score for hit in hits}
    assert scores[ep(2)] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[ep(1)] == pytest.approx(1 / 61)
    assert scores[ep(3)] == pytest.approx(1 / 62)


def test_rrf_k_changes_how_much_a_top_rank_is_worth() -> None:
    hits = RrfRanker(RankerConfig(rrf_k=0)).rank(request(vector_hits=leg(ep(1), ep(2), ep(3))))
    assert [hit.score for hit in hits] == pytest.approx([1.0, 1 / 2, 1 / 3])


def test_rrf_leg_weights_scale_each_legs_contribution() -> None:
    config = RankerConfig(rrf_k=60, vector_weight=2.0, keyword_weight=0.5)
    hits = RrfRanker(config).rank(request(vector_hits=leg(ep(1)), keyword_hits=leg(ep(2), ep(1))))
    scores = {hit.key: hit.score for hit in hits}
    assert scores[ep(1)] == pytest.approx(2.0 / 61 + 0.5 / 62)
    assert scores[ep(2)] == pytest.approx(0.5 / 61)


def test_a_leg_weighted_zero_brings_no_candidates() -> None:
    hits = RrfRanker(RankerConfig(keyword_weight=0.0)).rank(
        request(vector_hits=leg(ep(1)), keyword_hits=leg(ep(2)))
    )
    assert keys(hits) == [ep(1)]


def test_rrf_breaks_equal_scores_by_key() -> None:
    # ep(5) is first in one leg and ep(3) first in the other: equal fused scores (equal leg weights).
    hits = RrfRanker(RankerConfig(keyword_weight=1.0)).rank(
        request(vector_hits=leg(ep(5), ep(3)), keyword_hits=leg(ep(3), ep(5)))
    )
    assert keys(hits) == [ep(3), ep(5)]
    assert hits[0].score == hits[1].score


def test_equal_scores_order_by_source_then_id() -> None:
    entity, summary, episode = ("entities", 9), ("summaries", 1), ("episodes", 4)
    hits = RrfRanker(RankerConfig()).rank(
        request(vector_hits=leg(summary), keyword_hits=[LegHit(entity, 1.0, 1), LegHit(episode, 1.0, 1)])
    )
    assert keys(hits) == [entity, episode, summary]


def test_rrf_answers_the_keyword_leg_when_the_vector_leg_is_empty() -> None:
    hits = RrfRanker(RankerConfig()).rank(request(keyword_hits=leg(ep(7), ep(8))))
    assert keys(hits) == [ep(7), ep(8)]


def test_rrf_answers_the_vector_leg_when_the_keyword_leg_is_empty() -> None:
    hits = RrfRanker(RankerConfig()).rank(request(vector_hits=leg(ep(8), ep(7))))
    assert keys(hits) == [ep(8), ep(7)]


def test_every_built_in_answers_nothing_when_both_legs_are_empty() -> None:
    for ranker in builtin_plugin.nexusai_memory_register_rankers(config=RankerConfig()):
        assert ranker.rank(request(candidates=[candidate(ep(1))])) == [], ranker.name


def test_rrf_respects_the_limit() -> None:
    hits = RrfRanker(RankerConfig()).rank(request(vector_hits=leg(*[ep(n) for n in range(1, 30)]), limit=5))
    assert keys(hits) == [ep(n) for n in range(1, 6)]


def test_a_limit_of_zero_gives_no_hits() -> None:
    for ranker in builtin_plugin.nexusai_memory_register_rankers(config=RankerConfig()):
        assert ranker.rank(request(vector_hits=leg(ep(1)), keyword_hits=leg(ep(1)), limit=0)) == [], ranker.name


def test_leg_hits_without_a_candidate_are_skipped() -> None:
    hits = RrfRanker(RankerConfig()).rank(
        request(vector_hits=leg(ep(1), ep(2)), candidates=[candidate(ep(2))])
    )
    assert keys(hits) == [ep(2)]


def test_a_key_repeated_in_one_leg_counts_once_at_its_best_rank() -> None:
    repeated = [LegHit(ep(1), 0.9, 1), LegHit(ep(1), 0.5, 3), LegHit(ep(2), 0.8, 2)]
    hits = RrfRanker(RankerConfig(rrf_k=60)).rank(request(vector_hits=repeated))
    assert [(hit.key, hit.score) for hit in hits] == [(ep(1), pytest.approx(1 / 61)), (ep(2), pytest.approx(1 / 62))]


# ---- single legs --------------------------------------------------------------------------------


def test_the_vector_ranker_keeps_the_vector_order_and_ignores_keywords() -> None:
    hits = VectorRanker().rank(request(vector_hits=leg(ep(3), ep(1), scores=[0.9, 0.4]), keyword_hits=leg(ep(2))))
    assert [(hit.key, hit.score) for hit in hits] == [(ep(3), 0.9), (ep(1), 0.4)]


def test_the_keyword_ranker_keeps_the_keyword_order_and_ignores_vectors() -> None:
    hits = KeywordRanker().rank(request(vector_hits=leg(ep(3)), keyword_hits=leg(ep(2), ep(4), scores=[7.5, 2.0])))
    assert [(hit.key, hit.score) for hit in hits] == [(ep(2), 7.5), (ep(4), 2.0)]


def test_a_single_leg_ranker_breaks_equal_ranks_by_key() -> None:
    hits = KeywordRanker().rank(request(keyword_hits=[LegHit(ep(9), 1.0, 1), LegHit(ep(4), 1.0, 1)]))
    assert keys(hits) == [ep(4), ep(9)]


# ---- weighted -----------------------------------------------------------------------------------


def test_weighted_standardises_each_leg_before_mixing() -> None:
    # Vector cosines and BM25 scores live on different scales; z-scores put both on one.
    hits = WeightedRanker(RankerConfig(weighted_alpha=0.5)).rank(
        request(
            vector_hits=leg(ep(1), ep(2), ep(3), scores=[0.9, 0.7, 0.5]),
            keyword_hits=leg(ep(3), ep(2), scores=[20.0, 10.0]),
        )
    )
    scores = {hit.key: hit.score for hit in hits}
    z_vector = 0.2 / math.sqrt(0.08 / 3)  # mean 0.7, population deviation sqrt(0.08 / 3)
    assert scores[ep(1)] == pytest.approx(0.5 * z_vector)
    assert scores[ep(2)] == pytest.approx(0.5 * 0.0 + 0.5 * -1.0)
    assert scores[ep(3)] == pytest.approx(0.5 * -z_vector + 0.5 * 1.0)
    assert keys(hits) == [ep(1), ep(3), ep(2)]


def test_weighted_counts_a_key_missing_from_a_leg_as_an_average_hit_of_it() -> None:
    hits = WeightedRanker(RankerConfig(weighted_alpha=0.5)).rank(
        request(vector_hits=leg(ep(1), ep(2), scores=[0.9, 0.1]), keyword_hits=leg(ep(3), ep(2), scores=[9.0, 1.0]))
    )
    scores = {hit.key: hit.score for hit in hits}
    assert scores[ep(1)] == pytest.approx(0.5) and scores[ep(3)] == pytest.approx(0.5)
    assert scores[ep(2)] == pytest.approx(-1.0)


def test_weighted_scales_a_leg_of_equal_scores_to_one() -> None:
    hits = WeightedRanker(RankerConfig(weighted_alpha=0.25)).rank(
        request(vector_hits=leg(ep(1), scores=[0.3]), keyword_hits=leg(ep(1), scores=[4.0]))
    )
    assert hits == [RankedHit(ep(1), pytest.approx(1.0))]


def test_weighted_with_alpha_one_is_the_vector_order() -> None:
    vector = leg(ep(4), ep(2), ep(9), scores=[0.8, 0.6, 0.1])
    keyword = leg(ep(9), ep(1), ep(2), scores=[30.0, 20.0, 10.0])
    weighted = WeightedRanker(RankerConfig(weighted_alpha=1.0)).rank(request(vector_hits=vector, keyword_hits=keyword))
    assert keys(weighted) == keys(VectorRanker().rank(request(vector_hits=vector, keyword_hits=keyword)))


def test_weighted_with_alpha_zero_is_the_keyword_order() -> None:
    vector = leg(ep(4), ep(2), ep(9), scores=[0.8, 0.6, 0.1])
    keyword = leg(ep(9), ep(1), ep(2), scores=[30.0, 20.0, 10.0])
    weighted = WeightedRanker(RankerConfig(weighted_alpha=0.0)).rank(request(vector_hits=vector, keyword_hits=keyword))
    assert keys(weighted) == [ep(9), ep(1), ep(2)]


# ---- recency ------------------------------------------------------------------------------------


def test_recency_prefers_the_newer_of_two_equally_relevant_memories() -> None:
    # Equal fused scores (each first in one leg); without decay the key order would put ep(1) first.
    ranked = RecencyRanker(RankerConfig()).rank(
        request(
            vector_hits=leg(ep(1), ep(2)),
            keyword_hits=leg(ep(2), ep(1)),
            candidates=[candidate(ep(1), age_days=40), candidate(ep(2), age_days=2)],
        )
    )
    assert keys(ranked) == [ep(2), ep(1)]


def test_recency_adds_a_bonus_that_halves_every_half_life() -> None:
    config = RankerConfig(rrf_k=60, recency_half_life_days=10.0, recency_weight=0.2)
    ranked = RecencyRanker(config).rank(
        request(
            vector_hits=[LegHit(ep(1), 0.9, 1), LegHit(ep(2), 0.9, 1), LegHit(ep(3), 0.9, 1)],
            candidates=[candidate(ep(1)), candidate(ep(2), age_days=10), candidate(ep(3), age_days=20)],
        )
    )
    # Relevance is scaled so the best is 1; the bonus is added, not multiplied.
    assert [(hit.key, hit.score) for hit in ranked] == [
        (ep(1), pytest.approx(1 + 0.2)),
        (ep(2), pytest.approx(1 + 0.1)),
        (ep(3), pytest.approx(1 + 0.05)),
    ]


def test_recency_counts_age_from_the_newest_candidate_not_from_now() -> None:
    # A conversation that ended a year ago ranks as it did when it was new: only the gaps matter.
    old = RecencyRanker(RankerConfig(rrf_k=60)).rank(
        request(vector_hits=leg(ep(1), ep(2)), candidates=[candidate(ep(1), age_days=400),
                                                          candidate(ep(2), age_days=365)])
    )
    new = RecencyRanker(RankerConfig(rrf_k=60)).rank(
        request(vector_hits=leg(ep(1), ep(2)), candidates=[candidate(ep(1), age_days=35), candidate(ep(2))])
    )
    assert [(h.key, round(h.score, 9)) for h in old] == [(h.key, round(h.score, 9)) for h in new]


def test_recency_gives_a_future_timestamp_no_more_than_the_full_bonus() -> None:
    ranked = RecencyRanker(RankerConfig(rrf_k=60, recency_weight=0.2)).rank(
        request(vector_hits=leg(ep(1)), candidates=[candidate(ep(1), age_days=-3)])
    )
    assert ranked[0].score == pytest.approx(1.2)


def test_a_strong_relevance_lead_survives_moderate_age() -> None:
    ranked = RecencyRanker(RankerConfig(rrf_k=0, recency_half_life_days=30)).rank(
        request(
            vector_hits=leg(ep(1), ep(2), ep(3), ep(4)),
            keyword_hits=leg(ep(1)),
            candidates=[candidate(ep(1), age_days=30), *[candidate(ep(n)) for n in (2, 3, 4)]],
        )
    )
    assert keys(ranked)[0] == ep(1)  # (1 + 1) / 2 = 1 beats 1/2 for the newest


# ---- mmr ----------------------------------------------------------------------------------------


def test_mmr_pushes_a_near_duplicate_below_a_diverse_item() -> None:
    candidates = [
        candidate(ep(1), vector=(1.0, 0.0, 0.0)),
        candidate(ep(2), vector=(0.999, 0.01, 0.0)),  # nearly ep(1) again
        candidate(ep(3), vector=(0.0, 1.0, 0.0)),
    ]
    vector_hits, keyword_hits = leg(ep(1), ep(2), ep(3)), leg(ep(1), ep(2), ep(3))
    by_relevance = RrfRanker(RankerConfig()).rank(
        request(vector_hits=vector_hits, keyword_hits=keyword_hits, candidates=candidates)
    )
    diverse = MmrRanker(RankerConfig(mmr_lambda=0.7)).rank(
        request(vector_hits=vector_hits, keyword_hits=keyword_hits, candidates=candidates)
    )
    assert keys(by_relevance) == [ep(1), ep(2), ep(3)]
    assert keys(diverse) == [ep(1), ep(3), ep(2)]


def test_mmr_scores_never_increase_down_the_list() -> None:
    candidates = [candidate(ep(n), vector=(math.cos(n), math.sin(n), 0.1 * n)) for n in range(1, 9)]
    ranked = MmrRanker(RankerConfig(mmr_lambda=0.5)).rank(
        request(vector_hits=leg(*[ep(n) for n in range(1, 9)]), keyword_hits=leg(ep(8), ep(3)), candidates=candidates)
    )
    scores = [hit.score for hit in ranked]
    assert scores == sorted(scores, reverse=True)


def test_mmr_with_lambda_one_is_the_fusion_order() -> None:
    candidates = [candidate(ep(n), vector=(1.0, 0.0)) for n in range(1, 5)]
    hits = {"vector_hits": leg(ep(4), ep(1), ep(3), ep(2)), "keyword_hits": leg(ep(3))}
    mmr = MmrRanker(RankerConfig(mmr_lambda=1.0)).rank(request(candidates=candidates, **hits))
    rrf = RrfRanker(RankerConfig()).rank(request(candidates=candidates, **hits))
    assert keys(mmr) == keys(rrf)


def test_mmr_falls_back_to_the_fusion_order_without_vectors() -> None:
    candidates = [candidate(ep(n)) for n in range(1, 5)]
    hits = {"vector_hits": leg(ep(2), ep(1)), "keyword_hits": leg(ep(3), ep(2), ep(4))}
    mmr = MmrRanker(RankerConfig(mmr_lambda=0.3)).rank(request(candidates=candidates, **hits))
    rrf = RrfRanker(RankerConfig()).rank(request(candidates=candidates, **hits))
    assert keys(mmr) == keys(rrf)


def test_mmr_treats_a_zero_vector_as_missing() -> None:
    candidates = [candidate(ep(1), vector=(0.0, 0.0)), candidate(ep(2), vector=(0.0, 0.0))]
    ranked = MmrRanker(RankerConfig()).rank(request(vector_hits=leg(ep(1), ep(2)), candidates=candidates))
    assert keys(ranked) == [ep(1), ep(2)]


def test_only_mmr_asks_for_vectors() -> None:
    rankers = builtin_plugin.nexusai_memory_register_rankers(config=RankerConfig())
    assert {ranker.name for ranker in rankers if ranker.needs_vectors} == {"mmr"}


# ---- every built-in -----------------------------------------------------------------------------


def _mixed_requests() -> list[RankingRequest]:
    """Overlapping legs, ties, repeats, missing candidates, three sources, varied ages and vectors."""
    pool: list[Key] = [("episodes", n) for n in range(1, 13)] + [("entities", 1), ("summaries", 2)]
    candidates = [
        candidate(key, age_days=index * 3.5, vector=None if index % 4 == 0 else (math.cos(index), math.sin(index)))
        for index, key in enumerate(pool)
        if key != ("episodes", 5)  # a leg hit whose row vanished
    ]
    vector = leg(*pool[:9], scores=[0.9, 0.9, 0.8, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4])
    keyword = [*leg(pool[8], pool[2], pool[13], pool[4], pool[11], scores=[9, 9, 5, 3, 1]), LegHit(pool[2], 1.0, 7)]
    shapes = [
        {"vector_hits": vector, "keyword_hits": keyword},
        {"vector_hits": vector, "keyword_hits": ()},
        {"vector_hits": (), "keyword_hits": keyword},
    ]
    return [request(candidates=candidates, limit=limit, **shape) for shape in shapes for limit in (1, 3, 5, 50)]


BUILT_INS = builtin_plugin.nexusai_memory_register_rankers(config=RankerConfig())


@pytest.mark.parametrize("ranker", BUILT_INS, ids=lambda ranker: ranker.name)
def test_every_built_in_keeps_the_ranker_contract(ranker: object) -> None:
    for ranking_request in _mixed_requests():
        hits = ranker.rank(ranking_request)  # type: ignore[attr-defined]
        answered = keys(hits)
        assert len(answered) <= ranking_request.limit
        assert len(set(answered)) == len(answered)
        assert set(answered) <= set(ranking_request.candidates)
        assert all(isinstance(hit, RankedHit) and math.isfinite(hit.score) for hit in hits)
        assert ranker.rank(ranking_request) == hits  # type: ignore[attr-defined]  # deterministic


def test_every_built_in_has_a_name_and_a_one_line_description() -> None:
    rankers = builtin_plugin.nexusai_memory_register_rankers(config=RankerConfig())
    assert [ranker.name for ranker in rankers] == [
        "conversation", "rrf", "vector", "keyword", "weighted", "recency", "mmr"]
    assert all(ranker.description and "\n" not in ranker.description for ranker in rankers)


# ---- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("rrf_k", -1),
        ("weighted_alpha", 1.5),
        ("mmr_lambda", -0.1),
        ("recency_half_life_days", 0.0),
        ("vector_weight", -1.0),
        ("keyword_weight", math.nan),
        ("recency_weight", -0.5),
        ("context_weight", math.inf),
        ("time_weight", -1.0),
    ],
)
def test_a_ranker_setting_out_of_range_is_invalid_and_named(setting: str, value: float) -> None:
    with pytest.raises(Invalid) as raised:
        RankerConfig(**{setting: value})
    assert raised.value.field == setting


def test_ranker_options_cannot_be_changed_by_a_plugin() -> None:
    config = RankerConfig(options={"myplugin_foo": "1"})
    with pytest.raises(TypeError):
        config.options["myplugin_foo"] = "2"  # type: ignore[index]
