"""HashEmbedder: not semantic, but shaped so that retrieval over it behaves sensibly."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from adapters.embedders.hashing import HashEmbedder, hash_vector

DIMENSION = 768


def _cosine(left: list[float], right: list[float]) -> float:
    return sum(a * b for a, b in zip(left, right, strict=True))


@pytest.mark.parametrize("text", ["", "a", "the user likes green tea", "日本語 🙂", "!!! ???"])
def test_every_vector_has_unit_length(text: str) -> None:
    vector = hash_vector(text, DIMENSION)

    assert math.sqrt(sum(value * value for value in vector)) == pytest.approx(1.0)


def test_texts_sharing_words_are_closer_than_unrelated_texts() -> None:
    query = hash_vector("which tea does the user prefer", DIMENSION)
    related = hash_vector("the user prefers green tea in the morning", DIMENSION)
    unrelated = hash_vector("the deploy failed on friday night", DIMENSION)

    assert _cosine(query, related) > 0.3
    assert abs(_cosine(query, unrelated)) < 0.2


def test_stop_words_alone_do_not_make_texts_similar() -> None:
    one = hash_vector("what is the plan for the trip to the lake", DIMENSION)
    other = hash_vector("what is the state of the budget for the year", DIMENSION)

    assert _cosine(one, other) < 0.3


def test_word_forms_share_character_trigrams() -> None:
    assert _cosine(hash_vector("memories", DIMENSION), hash_vector("memory", DIMENSION)) > 0.2


def test_case_does_not_matter() -> None:
    assert hash_vector("Green Tea", DIMENSION) == hash_vector("green tea", DIMENSION)


def test_vectors_are_the_same_in_another_process_with_another_hash_seed() -> None:
    script = (
        "import json; from adapters.embedders.hashing import hash_vector;"
        " print(json.dumps(hash_vector('green tea', 16)))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    output = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    ).stdout

    assert json.loads(output) == pytest.approx(hash_vector("green tea", 16))


async def test_a_large_batch_gives_the_same_vectors_as_single_texts() -> None:
    embedder = HashEmbedder(DIMENSION)
    texts = [f"episode {index} about green tea" for index in range(40)]

    vectors = await embedder.embed(texts)

    assert vectors == [hash_vector(text, DIMENSION) for text in texts]


def test_a_dimension_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        HashEmbedder(0)


def _reference_vector(text: str, dimension: int) -> list[float]:
    """The plain form of the hash embedding (as it was written before the cached, sparse one):
    every feature added into a dense vector, the norm over all ``dimension`` slots."""
    import hashlib
    import re

    from adapters.embedders import hashing

    def slot_of(feature: str) -> tuple[int, float]:
        digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
        return digest % dimension, (1.0 if digest >> 63 else -1.0)

    features: list[tuple[str, float]] = []
    for word in re.findall(r"\w+", text.casefold()):
        if word in hashing._STOP_WORDS:
            features.append(("w:" + word, 0.15))
            continue
        features.append(("w:" + word, 1.0))
        padded = f"<{word}>"
        features.extend(("c:" + padded[i : i + 3], 0.35) for i in range(len(padded) - 2))
    vector = [0.0] * dimension
    for feature, weight in features:
        slot, sign = slot_of(feature)
        vector[slot] += sign * weight
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:
        slot, sign = slot_of("empty:")
        vector[slot] = sign
        return vector
    return [value / norm for value in vector]


_PINNED_TEXTS = [
    "", "a", "the", "the user likes green tea", "Green Tea", "日本語 🙂", "!!! ???", "tea tea tea tea",
    "User: what did we decide about the lighthouse trip?\nAssistant: We said Saturday, weather permitting.",
    "memories memory memorial remember", "aaa aaaa aaaaa b bb bbb", "Ünïcödé façade naïve café",
    " ".join(f"word{n}" for n in range(300)),
]


@pytest.mark.parametrize("dimension", [1, 2, 7, 16, 384, 768])
def test_vectors_are_bit_for_bit_those_of_the_plain_form(dimension: int) -> None:
    # Stored embeddings and indexes built before the sparse form must stay valid: equal, not close.
    import random

    rng = random.Random(dimension)
    vocabulary = ["tea", "the", "of", "lighthouse", "a", "remember", "x", "zz", "trip", "café", "42"]
    texts = _PINNED_TEXTS + [" ".join(rng.choices(vocabulary, k=rng.randint(1, 40))) for _ in range(200)]
    for text in texts:
        assert hash_vector(text, dimension) == _reference_vector(text, dimension), text
