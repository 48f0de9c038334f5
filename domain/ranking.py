"""What a ranker is given and what it answers: the shapes shared by retrieval and ranker plugins.

A search runs two legs, vector and keyword, over the ``episodes``, ``entities`` and ``summaries``
sources; each leg answers keys with its own score and rank. The retrieval service loads the rows
behind those keys (the candidates) and hands everything to one ranker, which fuses and orders them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from domain.errors import Invalid
from domain.record_kinds import NAMES

Key = tuple[str, int]
"""(source, id): source is ``"episodes"``, ``"entities"`` or ``"summaries"``; id is the SQLite row id."""

SOURCES = NAMES  # the record kinds a search may ask for

MAX_CONTEXT_WINDOW = 3
"""The most neighbours on each side a ranker may ask for: more is a different retrieval, not context."""


@dataclass(frozen=True, slots=True)
class LegHit:
    """One result of one leg: its score in that leg's own units and its rank (1 = best in the leg)."""

    key: Key
    score: float
    rank: int


@dataclass(frozen=True, slots=True)
class Candidate:
    """A loaded row a ranker may return; ``vector`` is filled only for rankers that need vectors."""

    key: Key
    item: object  # a domain.models Episode, Entity or Summary
    created_at: datetime
    vector: tuple[float, ...] | None = None


@dataclass(frozen=True, slots=True)
class Context:
    """The keys of the episodes around one episode in its session (created_at, then id), nearest
    first on each side: ``before[0]`` is the turn just before it."""

    before: tuple[Key, ...] = ()
    after: tuple[Key, ...] = ()


@dataclass(frozen=True, slots=True)
class RankingRequest:
    """Everything a ranker sees for one search.

    Either leg may be empty: with the embedder or vector index down there are no vector hits, and a
    query made only of stop-words has no keyword hits. A leg hit whose row vanished between the leg
    and the load has no candidate; rankers skip it.
    """

    query: str
    query_vector: tuple[float, ...] | None
    vector_hits: Sequence[LegHit]
    keyword_hits: Sequence[LegHit]
    candidates: Mapping[Key, Candidate]
    limit: int
    now: datetime
    neighbours: Mapping[Key, Context] = field(default_factory=dict)
    """For rankers with a ``context_window``: the session neighbours of each episode candidate that
    a leg ranked in its first ``CONTEXT_DEPTH``. Every neighbour is itself a candidate (loaded even
    when no leg found it), so a ranker may return it; episodes at a session's edge have shorter
    sides, and neighbours outside the search's time range are left out."""


@dataclass(frozen=True, slots=True)
class RankedHit:
    """One ranked result: a candidate key and the ranker's final score (higher is better)."""

    key: Key
    score: float


def _read_only(options: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(options))


@dataclass(frozen=True, slots=True)
class RankerConfig:
    """Settings handed to every ranker plugin when it registers its rankers.

    ``vector_weight`` and ``keyword_weight`` scale each leg's contribution to reciprocal rank
    fusion (``rrf``, ``recency`` and ``mmr`` build on it). ``recency_weight`` is how much the
    newest memory gains over an equally relevant old one, as a share of the best relevance.
    ``context_weight`` and ``time_weight`` belong to the ``conversation`` ranker (see
    ``adapters/rankers/conversation.py``). ``options`` carries settings for third-party rankers,
    taken from ``RANKER_*`` environment variables.
    """

    rrf_k: int = 5  # tuned on the LoCoMo dev set, as is keyword_weight: BM25 is the stronger leg there
    weighted_alpha: float = 0.3
    recency_half_life_days: float = 30.0
    mmr_lambda: float = 0.7
    vector_weight: float = 1.0
    keyword_weight: float = 3.0
    recency_weight: float = 0.2
    context_weight: float = 0.5
    time_weight: float = 0.5
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A bad value here comes from configuration; naming the field lets start-up say which one.
        if self.rrf_k < 0:
            raise Invalid("rrf_k must be 0 or more", field="rrf_k")
        for name in ("weighted_alpha", "mmr_lambda"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise Invalid(f"{name} must be between 0 and 1", field=name)
        if not (math.isfinite(self.recency_half_life_days) and self.recency_half_life_days > 0):
            raise Invalid("recency_half_life_days must be more than 0", field="recency_half_life_days")
        for name in ("vector_weight", "keyword_weight", "recency_weight", "context_weight", "time_weight"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise Invalid(f"{name} must be 0 or more", field=name)
        # Frozen means frozen: a plugin must not be able to change the options another one sees.
        object.__setattr__(self, "options", _read_only(self.options))
