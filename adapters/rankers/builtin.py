"""The built-in rankers. Each is small; the shared fusion lives in ``fusion``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from adapters.rankers.fusion import (
    best_first,
    dot,
    leg_by_key,
    leg_order,
    rrf_scores,
    unit,
    z_scores,
)
from domain.ranking import Key, RankedHit, RankerConfig, RankingRequest

_SECONDS_PER_DAY = 86_400.0


class RrfRanker:
    """Reciprocal rank fusion of both legs: robust to their different score units."""

    name = "rrf"
    description = "Reciprocal rank fusion of the vector and keyword legs: sum of weight / (k + rank)."
    needs_vectors = False
    context_window = 0

    def __init__(self, config: RankerConfig) -> None:
        self._config = config

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        return best_first(rrf_scores(request, self._config), request.limit)


class VectorRanker:
    name = "vector"
    description = "The vector (semantic) leg alone, in its own order."
    needs_vectors = False  # the leg's scores are enough; the stored vectors are not compared
    context_window = 0

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        return leg_order(leg_by_key(request.vector_hits, request.candidates), request.limit)


class KeywordRanker:
    name = "keyword"
    description = "The keyword (FTS5 BM25) leg alone, in its own order."
    needs_vectors = False
    context_window = 0

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        return leg_order(leg_by_key(request.keyword_hits, request.candidates), request.limit)


class WeightedRanker:
    """Linear fusion of standardised leg scores: ``alpha * z(vector) + (1 - alpha) * z(keyword)``.

    Unlike rank fusion it keeps how far apart the scores are, so one clearly best keyword match
    (or vector) is not flattened to "rank 1". Z-scores beat min-max on the LoCoMo dev set (recall@10
    0.789 against 0.759 with all-MiniLM-L6-v2); min-max lets one outlier squash a whole leg.
    """

    name = "weighted"
    description = "Standardised (z-score) leg scores fused linearly: alpha * vector + (1 - alpha) * keyword."
    needs_vectors = False
    context_window = 0

    def __init__(self, config: RankerConfig) -> None:
        self._alpha = config.weighted_alpha

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        vector = leg_by_key(request.vector_hits, request.candidates)
        keyword = leg_by_key(request.keyword_hits, request.candidates)
        scores: dict[Key, float] = {}
        # A leg weighted 0 brings no candidates, so alpha=1 is exactly the vector order.
        for leg, weight in ((vector, self._alpha), (keyword, 1.0 - self._alpha)):
            if weight <= 0:
                continue
            for key, normalised in z_scores({key: hit.score for key, hit in leg.items()}).items():
                scores[key] = scores.get(key, 0.0) + weight * normalised
        return best_first(scores, request.limit)


class RecencyRanker:
    """Reciprocal rank fusion plus a recency bonus, so newer memories win ties of relevance.

    Relevance is the fusion score over the best one (the top is 1); the bonus is
    ``recency_weight * 2^(-age / half-life)``, with age counted from the newest candidate rather
    than from now. Added, not multiplied: a clearly better old memory still beats a weak new one,
    and a conversation imported from last year is not decayed to nothing as a whole.
    """

    name = "recency"
    description = "Reciprocal rank fusion plus recency_weight * 2^(-age / half-life), age from the newest candidate."
    needs_vectors = False
    context_window = 0

    def __init__(self, config: RankerConfig) -> None:
        self._config = config
        self._weight = config.recency_weight
        self._half_life_seconds = config.recency_half_life_days * _SECONDS_PER_DAY

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        scores = rrf_scores(request, self._config)
        if not scores:
            return []
        top = max(scores.values())
        newest = max(request.candidates[key].created_at for key in scores)
        for key in scores:
            age = (newest - request.candidates[key].created_at).total_seconds()
            scores[key] = scores[key] / top + self._weight * math.pow(2.0, -age / self._half_life_seconds)
        return best_first(scores, request.limit)


class MmrRanker:
    """Maximal marginal relevance: trade relevance against similarity to the hits already chosen.

    Relevance is the reciprocal-rank-fusion score divided by the best one (so the top is 1);
    similarity is the cosine between stored candidate vectors. Without vectors there is nothing to
    compare, the penalty is 0 and the order is the fusion order.
    """

    name = "mmr"
    description = "Maximal marginal relevance over stored vectors: fused relevance, near-duplicates pushed down."
    needs_vectors = True
    context_window = 0

    def __init__(self, config: RankerConfig) -> None:
        self._config = config
        self._lambda = config.mmr_lambda

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        fused = rrf_scores(request, self._config)
        if not fused or request.limit <= 0:
            return []
        top = max(fused.values())
        relevance = {key: score / top for key, score in fused.items()}
        vectors = {key: unit(request.candidates[key].vector) for key in fused}
        # Similarities below 0 are floored at 0: being unlike a chosen hit is no reason to outrank
        # a more relevant one, and the floor keeps the chosen scores non-increasing.
        penalty = dict.fromkeys(fused, 0.0)
        remaining = set(fused)
        chosen: list[RankedHit] = []
        while remaining and len(chosen) < request.limit:
            marginal = {
                key: self._lambda * relevance[key] - (1.0 - self._lambda) * penalty[key] for key in remaining
            }
            pick = min(remaining, key=lambda key: (-marginal[key], key))
            chosen.append(RankedHit(key=pick, score=marginal[pick]))
            remaining.discard(pick)
            picked = vectors[pick]
            if picked is None:
                continue
            for key in remaining:
                vector = vectors[key]
                if vector is not None:
                    penalty[key] = max(penalty[key], dot(picked, vector))
        return chosen

