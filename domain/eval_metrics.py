"""Retrieval metrics over ranked episodes, each episode standing for the conversation turns it holds.

``recall`` is this project's evidence recall (the share of a question's evidence turns the top k
cover). ``recall_any``, ``recall_all`` and ``ndcg`` are the retrieval metrics LongMemEval reports
(any / all of the evidence in the top k; normalised discounted cumulative gain with binary gains),
so figures on your own data compare with published ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _covered(ranked_turns: Sequence[Sequence[str]], k: int) -> set[str]:
    return {turn for turns in ranked_turns[:k] for turn in turns}


def recall(wanted: Sequence[str], ranked_turns: Sequence[Sequence[str]], k: int) -> float:
    """The share of ``wanted`` turn ids covered by the first ``k`` ranked episodes' turns."""
    return len(set(wanted) & _covered(ranked_turns, k)) / len(set(wanted))


def recall_any(wanted: Sequence[str], ranked_turns: Sequence[Sequence[str]], k: int) -> float:
    """1 when the first ``k`` episodes hold at least one of ``wanted``, else 0."""
    return 1.0 if set(wanted) & _covered(ranked_turns, k) else 0.0


def recall_all(wanted: Sequence[str], ranked_turns: Sequence[Sequence[str]], k: int) -> float:
    """1 when the first ``k`` episodes hold every one of ``wanted``, else 0."""
    return 1.0 if set(wanted) <= _covered(ranked_turns, k) else 0.0


def ndcg(wanted: Sequence[str], ranked_turns: Sequence[Sequence[str]], k: int, relevant: int) -> float:
    """NDCG@k with a gain of 1 for each ranked episode holding some of ``wanted``; ``relevant`` is
    how many episodes of the memory hold some (the ideal ranking puts them first)."""
    target = set(wanted)
    gained = sum(1.0 / math.log2(rank + 1) for rank, turns in enumerate(ranked_turns[:k], start=1)
                 if target & set(turns))
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, relevant) + 1))
    return gained / ideal if ideal else 0.0
