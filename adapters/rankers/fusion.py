"""Fusion helpers shared by the built-in rankers: leg lookups, reciprocal rank fusion, ordering."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence

from domain.ranking import Candidate, Key, LegHit, RankedHit, RankerConfig, RankingRequest


def leg_by_key(hits: Sequence[LegHit], candidates: Mapping[Key, Candidate]) -> dict[Key, LegHit]:
    """The leg's hits that have a candidate, one per key (the best-ranked if a key repeats)."""
    best: dict[Key, LegHit] = {}
    for hit in hits:
        if hit.key not in candidates:
            continue  # the row was deleted between the leg and the load
        seen = best.get(hit.key)
        if seen is None or hit.rank < seen.rank:
            best[hit.key] = hit
    return best


def weighted_legs(request: RankingRequest, config: RankerConfig) -> list[tuple[dict[Key, LegHit], float]]:
    """Both legs with their fusion weights; a leg weighted 0 is left out so it brings no candidates."""
    legs = (
        (request.vector_hits, config.vector_weight),
        (request.keyword_hits, config.keyword_weight),
    )
    return [(leg_by_key(hits, request.candidates), weight) for hits, weight in legs if weight > 0]


def rrf_scores(request: RankingRequest, config: RankerConfig) -> dict[Key, float]:
    """Reciprocal rank fusion: for each key, the sum over legs of ``weight / (k + rank)``."""
    scores: dict[Key, float] = {}
    for leg, weight in weighted_legs(request, config):
        for key, hit in leg.items():
            # rank is 1-based by contract; the floor keeps k=0 from dividing by zero on a bad rank.
            scores[key] = scores.get(key, 0.0) + weight / (config.rrf_k + max(hit.rank, 1))
    return scores


def z_scores(scores: Mapping[Key, float]) -> dict[Key, float]:
    """Standardise scores to mean 0, deviation 1; a leg whose scores are all equal scales to 1.

    A key absent from the leg then counts as an average hit of it (0): on the LoCoMo dev set that
    beats imputing the leg's minimum, because a leg's tail (a weak keyword match, a distant vector)
    says less than its absence does.
    """
    if not scores:
        return {}
    values = list(scores.values())
    mean = math.fsum(values) / len(values)
    deviation = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    if deviation == 0.0:
        return {key: 1.0 for key in scores}
    return {key: (score - mean) / deviation for key, score in scores.items()}


def best_first(scores: Mapping[Key, float], limit: int) -> list[RankedHit]:
    """The ``limit`` best keys by score, ties broken by key."""
    if limit <= 0:
        return []
    ordered = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [RankedHit(key=key, score=score) for key, score in ordered[:limit]]


def leg_order(leg: Mapping[Key, LegHit], limit: int) -> list[RankedHit]:
    """A single leg in its own rank order (ties by key), keeping the leg's score."""
    if limit <= 0:
        return []
    ordered = sorted(leg.values(), key=lambda hit: (hit.rank, hit.key))
    return [RankedHit(key=hit.key, score=hit.score) for hit in ordered[:limit]]


def unit(vector: Iterable[float] | None) -> tuple[float, ...] | None:
    """The vector scaled to length 1, or None when it is missing or zero (no direction to compare)."""
    if vector is None:
        return None
    values = tuple(vector)
    norm = math.sqrt(sum(map(operator.mul, values, values)))
    if norm == 0.0 or not math.isfinite(norm):
        return None
    return tuple(value / norm for value in values)


def dot(left: Sequence[float], right: Sequence[float]) -> float:
    """Dot product; of unit vectors, their cosine similarity."""
    return sum(map(operator.mul, left, right))
