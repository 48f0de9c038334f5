"""HashEmbedder: deterministic feature hashing, for development and tests. NOT semantic.

A text becomes the signed, hashed sum of its word unigrams and of the character trigrams of each
word, L2-normalised. Texts that share words (or word stems: "memory" / "memories") get a high
cosine, unrelated texts a cosine near zero, so hybrid retrieval over it behaves sensibly; but it
knows nothing of meaning ("car" and "automobile" are unrelated to it). It needs no model, no
network and no randomness: the same text gives the same vector in every process (blake2b, not
Python's salted ``hash``).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from adapters.embedders.common import EmbedderFacts
from ports.embedder import EmbedderStatus

# Up to this many texts (a search query, a small batch) are hashed inline: cheaper than a thread.
_INLINE_BATCH = 16
_WORD = re.compile(r"\w+")
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.35
# Function words carry little of what a memory is about; keeping them at full weight would make
# any two English sentences look alike.
_STOP_WEIGHT = 0.15
_STOP_WORDS = frozenset(
    "a an and are as at be but by do does did for from had has have he her his i if in into is it"
    " its me my no not of on or our she so than that the their them then there these they this to"
    " too us was we were what when where which who why will with you your".split()
)


def hash_vector(text: str, dimension: int) -> list[float]:
    """The unit vector of ``text``; every text, even ``""``, gets a non-zero one.

    Each word's slots and signed weights are cached (as arrays) and added in one ``np.add.at``,
    which adds them one after another in the order given: the vector is bit for bit the one the
    plain Python form gives (each slot sums the same terms in the same order; ``sum`` adds the
    squares of the non-zero slots in slot order, a zero slot adding exactly nothing; each slot is
    divided by the same norm). A test holds the plain form and compares."""
    words = _WORD.findall(text.casefold())
    dense = np.zeros(dimension)
    if words:
        parts = [_word_terms(word, dimension) for word in words]
        np.add.at(dense, np.concatenate([slots for slots, _ in parts]), np.concatenate([v for _, v in parts]))
    touched = dense[dense != 0.0]
    norm = math.sqrt(sum((touched * touched).tolist()))
    if norm == 0.0:
        # Features may cancel out; fall back to a fixed direction rather than a zero vector,
        # which cosine distance cannot handle.
        vector = [0.0] * dimension
        slot, sign = _slot("empty:", dimension)
        vector[slot] = sign
        return vector
    return (dense / norm).tolist()


def _word_features(word: str) -> list[tuple[str, float]]:
    """A word's features: the word (a stop word at a low weight, alone), then its character trigrams."""
    if word in _STOP_WORDS:
        return [("w:" + word, _STOP_WEIGHT)]
    padded = f"<{word}>"
    return [("w:" + word, _WORD_WEIGHT),
            *(("c:" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2))]


@lru_cache(maxsize=65_536)
def _word_terms(word: str, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """The slots and signed weights of a word's features, in feature order."""
    terms = [(slot, sign * weight) for feature, weight in _word_features(word)
             for slot, sign in [_slot(feature, dimension)]]
    return np.array([slot for slot, _ in terms], dtype=np.intp), np.array([value for _, value in terms])


@lru_cache(maxsize=262_144)
def _slot(feature: str, dimension: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    # The sign comes from the top bit, independent of the low bits that pick the slot.
    return digest % dimension, (1.0 if digest >> 63 else -1.0)


class HashEmbedder(EmbedderFacts):
    """Feature-hashing embedder (see the module docstring); in-process, never fails."""

    def __init__(self, dimension: int, model: str = "hash", max_batch: int = 256) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self._dimension = dimension
        self._model = model
        self._max_batch = max_batch

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if len(texts) <= _INLINE_BATCH:
            return [hash_vector(text, self._dimension) for text in texts]
        # A worker's batch of long texts takes tens of milliseconds: keep it off the event loop.
        return await asyncio.to_thread(self._embed_all, list(texts))

    def _embed_all(self, texts: list[str]) -> list[list[float]]:
        return [hash_vector(text, self._dimension) for text in texts]

    async def probe(self) -> EmbedderStatus:
        return EmbedderStatus(reachable=True, model=self._model, dimension=self._dimension)
