"""Reranking: a stronger model (``ports.reranker``) reorders the ranker's best hits.

The ranker is asked for ``depth`` hits (at least the search's limit); the reranker scores each
against the query, and they are put in its order, its score becoming the hit's ``score``. If the
reranker fails, the ranker's order stands and the search says so in a warning: a reranker is an
improvement, never a dependency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from domain.errors import DomainError
from domain.ranking import Key, RankedHit
from ports.reranker import Reranker

DEFAULT_DEPTH = 20


async def reranked(reranker: Reranker, query: str, hits: Sequence[RankedHit],
                   texts: Mapping[Key, str]) -> tuple[list[RankedHit], str | None]:
    """``hits`` in the reranker's order (ties keep the ranker's), or as they were with a warning."""
    if not hits:
        return [], None
    try:
        scores = await reranker.rerank(query, [texts[hit.key] for hit in hits])
    except DomainError as exc:
        return list(hits), f"reranker unavailable, the ranker's order kept: {exc.message}"
    if len(scores) != len(hits):
        return list(hits), f"reranker {reranker.name} answered {len(scores)} scores for {len(hits)} texts; ranker's order kept"
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
    return [RankedHit(hits[i].key, float(scores[i])) for i in order], None
