"""The conversation ranker: hybrid fusion that knows a memory is ordered turns in dated sessions.

Three steps, each with one parameter in standard-deviation units of the fused score (so they need
no re-tuning when a leg's raw scores change scale):

1. Fusion: z-scored vector and keyword legs, averaged with ``weighted_alpha`` (as ``weighted``).
2. Neighbours: an episode next to a strong hit in its session inherits ``context_weight`` of that
   hit's (positive) score, so the reply to a question, or the set-up of an answer, comes along
   even when it shares no words with the query. Neighbours no leg found are brought in.
3. Time: a question asking "when" lifts episodes that date their event ("yesterday", "in May")
   by ``time_weight``; a question naming a month or year lifts episodes from then by the same.

No recency step: on dated conversations it cost recall (``bench/locomo_recall.py`` on the dev set:
the ``recency`` ranker's R@10 0.751 against the 0.759 of ``rrf``, the fusion it adds decay to); the
``recency`` ranker is there for assistants that want newer memories first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from adapters.rankers.fusion import best_first, leg_by_key, z_scores
from adapters.rankers.temporal import asks_about_time, named_period, says_when, within
from domain.ranking import Key, RankedHit, RankerConfig, RankingRequest


class ConversationRanker:
    name = "conversation"
    description = ("Weighted z-score fusion plus conversation context: the neighbours of strong hits "
                   "and a lift for turns that say when, on questions that ask when.")
    needs_vectors = False
    context_window = 1

    def __init__(self, config: RankerConfig) -> None:
        self._alpha = config.weighted_alpha
        self._context = config.context_weight
        self._time = config.time_weight

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        fused = self._fuse(request)
        scores = self._with_neighbours(request, fused) if self._context > 0 else dict(fused)
        if self._time > 0:
            self._lift_dated(request, scores)
        return best_first(scores, request.limit)

    def _fuse(self, request: RankingRequest) -> dict[Key, float]:
        scores: dict[Key, float] = {}
        legs = ((request.vector_hits, self._alpha), (request.keyword_hits, 1.0 - self._alpha))
        for hits, weight in legs:
            if weight <= 0:
                continue
            leg = leg_by_key(hits, request.candidates)
            for key, z in z_scores({key: hit.score for key, hit in leg.items()}).items():
                scores[key] = scores.get(key, 0.0) + weight * z
        return scores

    def _with_neighbours(self, request: RankingRequest, fused: dict[Key, float]) -> dict[Key, float]:
        # Only what a hit scored before propagation is passed on, so lifts do not chain along a session.
        scores = dict(fused)
        for key, around in request.neighbours.items():
            strength = fused.get(key, 0.0)
            if strength <= 0:
                continue
            for neighbour in (*around.before[:1], *around.after[:1]):
                if neighbour in request.candidates:
                    lift = self._context * strength
                    scores[neighbour] = max(scores.get(neighbour, 0.0), fused.get(neighbour, 0.0) + lift)
        return scores

    def _lift_dated(self, request: RankingRequest, scores: dict[Key, float]) -> None:
        month, year = named_period(request.query)
        asks = asks_about_time(request.query)
        if (not asks and month is None and year is None) or not scores:
            return
        # Only a candidate within time_weight of the limit-th score can reach the answer, so only
        # those are read for time words (the reading is most of this ranker's CPU otherwise).
        ordered = sorted(scores.values(), reverse=True)
        reachable = ordered[min(request.limit, len(ordered)) - 1] - self._time if request.limit > 0 else math.inf
        for key, score in scores.items():
            candidate = request.candidates[key]
            if within(candidate.created_at, month, year) or (
                asks and score >= reachable and says_when(getattr(candidate.item, "text", ""))
            ):
                scores[key] = score + self._time
