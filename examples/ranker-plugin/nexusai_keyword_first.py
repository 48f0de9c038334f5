"""A third-party ranker for the NexusAI Memory Service: keyword matches first, then semantic ones.

For callers that look things up by exact words (names, codes, error messages): every hit of the
keyword leg comes first, in BM25 order, and the vector leg fills the rest with what the keywords
missed. It needs only pluggy: the request and hits are used by their attributes (duck typing).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pluggy

hookimpl = pluggy.HookimplMarker("nexusai_memory")


class Hit(NamedTuple):
    """What the service reads from a ranked hit: the candidate key and a score, higher is better."""

    key: tuple[str, int]
    score: float


class KeywordFirstRanker:
    name = "keyword-first"
    description = "Keyword matches first (BM25 order), then vector-only matches (semantic order)."
    needs_vectors = False

    def rank(self, request: Any) -> list[Hit]:
        ordered: list[tuple[str, int]] = []
        seen: set[tuple[str, int]] = set()
        for leg in (request.keyword_hits, request.vector_hits):
            # Ties in a leg's rank are broken by key, as the Ranker contract asks.
            for leg_hit in sorted(leg, key=lambda hit: (hit.rank, hit.key)):
                key = leg_hit.key
                if key in seen or key not in request.candidates:
                    continue
                seen.add(key)
                ordered.append(key)
        # Position-based scores: strictly decreasing, so the order is visible in the response.
        return [Hit(key, 1.0 / position) for position, key in enumerate(ordered[: max(request.limit, 0)], start=1)]


@hookimpl
def nexusai_memory_register_rankers(config: Any) -> list[KeywordFirstRanker]:
    return [KeywordFirstRanker()]
