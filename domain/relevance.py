"""Relevance on one fixed 0–1 scale, whatever the ranker and whatever the query.

A ranker's score orders the hits of one search, but it is relative: z-scores and reciprocal ranks
give the best of a set of unrelated records a high score all the same, so "my new pet cat" found
"nurse in Leeds" with a fused score near zero and no way to tell it apart from a poor match. A
hit's relevance is read from absolute evidence instead, so the same number means the same thing
on every search and for every built-in ranker:

- meaning: the cosine between the query's vector and the record's, mapped linearly from the
  embedding model's ``CosineScale.unrelated`` (0) to its ``close`` (1) and clipped;
- words: the share of the query's content words (stop-words left out) the record contains, each
  word compared by its first ``STEM`` letters so "allergies" meets "allergic", scaled so that a
  record holding only one word of a longer question stays low (``WORDS_FLOOR``).

The relevance is the larger of the two: either kind of evidence suffices on its own (the keyword
leg finds names a small embedding model blurs; the vector leg finds paraphrases). A turn that a
conversation ranker brings in as the neighbour of a hit inherits ``NEIGHBOUR_SHARE`` of that hit's
relevance, the share its score inherits by default, but only when it is on the subject at all
(some evidence of its own): the turn after "we adopted a kitten" may be "I work as a nurse in
Leeds", and that is no answer to a question about a pet. The cosine of a returned record the
vector leg did not rank is computed from its stored vector, so every hit is judged alike.

The constants are calibrated on the LoCoMo development set (``bench/relevance_floor.py``) with
all-MiniLM-L6-v2, the default in-process model, and with the hashing embedder.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from domain.keywords import terms_of

@dataclass(frozen=True, slots=True)
class CosineScale:
    """Where an embedding model's cosines mean relevance 0 (``unrelated``) and 1 (``close``)."""

    unrelated: float
    close: float


MINILM = CosineScale(0.2, 0.65)
"""all-MiniLM-L6-v2 on the LoCoMo dev set: a question and the best turns of another conversation
(where nothing answers it) meet at a median cosine of 0.25; evidence turns at 0.46 (p10 0.32);
only close paraphrases and direct answers pass 0.65."""
HASHED = CosineScale(0.1, 0.45)
"""Feature hashing, whose cosines run lower: off-topic median 0.13, evidence median 0.32 (p10 0.21)."""
COSINE_SCALES = {"all-minilm-l6-v2": MINILM, "hash": HASHED, "fake": HASHED}
"""By model name; a model not listed is read on all-MiniLM-L6-v2's scale (sentence embedding
models of its family spread their cosines alike; measure yours with bench/relevance_floor.py)."""


def cosine_scale(model: str) -> CosineScale:
    return COSINE_SCALES.get(model.rsplit("/", 1)[-1].lower(), MINILM)


WORDS_FLOOR = 0.25
"""Word coverage at or below this share counts as no evidence: one shared word of four is chance."""
STEM = 5
NEIGHBOUR_SHARE = 0.5

DEFAULT_FLOOR = 0.2
"""Hits below this relevance are not returned unless a request asks for a lower ``minScore``."""


def _stems(words: Iterable[str]) -> set[str]:
    return {word[:STEM] if len(word) > STEM else word.removesuffix("s") for word in words}


def query_terms(query: str) -> frozenset[str]:
    """The query's content words as compared with records (stop-words dropped, stemmed)."""
    return frozenset(_stems(terms_of(query, drop_stop_words=True)))


def word_evidence(terms: frozenset[str], text: str) -> float:
    """0–1: the share of ``terms`` in ``text`` above ``WORDS_FLOOR``, rescaled to reach 1."""
    if not terms:
        return 0.0
    found = len(terms & _stems(terms_of(text))) / len(terms)
    return max(0.0, (found - WORDS_FLOOR) / (1.0 - WORDS_FLOOR))


def meaning_evidence(cosine: float, scale: CosineScale = MINILM) -> float:
    """0–1: the cosine placed between the scale's ``unrelated`` and ``close``."""
    return min(1.0, max(0.0, (cosine - scale.unrelated) / (scale.close - scale.unrelated)))


def cosine(left: Sequence[float], right: Sequence[float]) -> float:
    """The cosine of two vectors; 0 when either has no length."""
    norms = math.sqrt(math.fsum(x * x for x in left)) * math.sqrt(math.fsum(y * y for y in right))
    return math.fsum(x * y for x, y in zip(left, right)) / norms if norms else 0.0


def relevance_of(
    query: str, texts: Mapping[object, str], cosines: Mapping[object, float],
    neighbours: Mapping[object, Iterable[object]] = {}, scale: CosineScale = MINILM,
) -> dict[object, float]:
    """The relevance of every key of ``texts``: ``cosines`` holds the vector leg's scores;
    ``neighbours`` maps a hit to the keys next to it that a ranker may have lifted."""
    terms = query_terms(query)
    out: dict[object, float] = {}
    for key, text in texts.items():
        cosine = cosines.get(key)
        vector_side = meaning_evidence(cosine, scale) if cosine is not None else 0.0
        out[key] = max(vector_side, word_evidence(terms, text))
    inherited: dict[object, float] = {}
    for key, around in neighbours.items():
        share = NEIGHBOUR_SHARE * out.get(key, 0.0)
        for neighbour in around:
            if out.get(neighbour, 0.0) > 0.0 and share > inherited.get(neighbour, 0.0):
                inherited[neighbour] = share
    for key, value in inherited.items():
        out[key] = max(out[key], value)
    return out
