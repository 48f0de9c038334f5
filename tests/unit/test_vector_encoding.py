"""``encode_vector`` (numpy) gives the very bytes of its plain form: ``normalized`` then ``struct``'s
float16 packing. Stored embeddings written before and after the change are interchangeable."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from domain.vectors import decode_vector, encode_vector, normalized


def _reference(vector) -> bytes:
    unit = normalized(vector)
    return struct.pack(f"<{len(unit)}e", *unit)


def _vectors() -> list:
    rng = random.Random(15)
    found: list = []
    for dimension in (1, 2, 3, 7, 16, 384, 768):
        for scale in (1e-30, 1e-8, 1e-3, 1.0, 1e3, 1e30):
            found.append([rng.gauss(0.0, 1.0) * scale for _ in range(dimension)])
    # One large component and many tiny ones: float16 subnormals and values that round to zero.
    for tiny in (1e-5, 3e-6, 6e-8, 2.9e-8, 1e-9):
        found.append([1.0] + [tiny * rng.choice((-1, 1)) * rng.random() for _ in range(383)])
    found.append([0.0] * 384)
    found.append([0, 3, 4])  # integers
    found.append([1.0] * 384)
    found.append(np.array([rng.gauss(0, 1) for _ in range(384)], dtype=np.float32))
    found.append(tuple(rng.uniform(-1, 1) for _ in range(384)))
    # Values on float16 rounding boundaries (ties go to even): halfway between neighbours.
    found.append([1.0, 2 ** -11, 2 ** -11 + 2 ** -22, 3 * 2 ** -12])
    return found


@pytest.mark.parametrize("vector", _vectors(), ids=lambda v: f"{len(v)}d")
def test_encode_vector_gives_the_bytes_of_normalize_then_pack(vector) -> None:
    assert encode_vector(vector) == _reference(vector)


def test_a_zero_vector_stays_zero_and_decodes_to_zeros() -> None:
    assert decode_vector(encode_vector([0.0, 0.0, 0.0])) == [0.0, 0.0, 0.0]
    assert decode_vector(encode_vector([1, 0, 0, 0])) == [1.0, 0.0, 0.0, 0.0]


def test_random_unit_vectors_of_the_hash_embedder_encode_alike() -> None:
    from adapters.embedders.hashing import hash_vector

    texts = [" ".join(random.Random(n).choice(["memory", "trip", "paris", "the", "a", "quantum", "zoe"])
                      for _ in range(n % 40 + 1)) for n in range(300)]
    for text in texts:
        vector = hash_vector(text, 384)
        assert encode_vector(vector) == _reference(vector)
