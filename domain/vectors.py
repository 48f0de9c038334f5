"""Vector-index values and the one place for the collections' shape (names, size, distance).

Every adapter and the container read these constants; no other module repeats ``768`` or
``"cosine"``. Points carry a small payload so the index can filter without a round trip to
SQLite: ``{"sessionId": int, "createdAt": "<ISO-8601 UTC ms>"}`` for episodes and summaries,
``{"createdAt": ...}`` for entities (they belong to no session).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from domain.models import parse_timestamp
from domain.record_kinds import NAMES

COLLECTIONS: tuple[str, ...] = NAMES  # one vector collection per record kind
DEFAULT_DIMENSION = 768  # nomic-embed-text; EMBEDDING_DIM overrides it
DISTANCE = "cosine"

SESSION_ID_FIELD = "sessionId"
CREATED_AT_FIELD = "createdAt"


@dataclass(frozen=True, slots=True)
class VectorPoint:
    """One point to store: ``id`` is the SQLite row id of the episode, entity or summary."""

    id: int
    vector: Sequence[float]
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class VectorHit:
    """One search result; ``score`` is cosine similarity in [-1, 1], higher is better."""

    id: int
    score: float


@dataclass(frozen=True, slots=True)
class VectorFilter:
    """Conditions on a point's payload; every condition given must hold (AND).

    ``session_id`` matches ``payload["sessionId"]``; ``since`` and ``until`` bound
    ``payload["createdAt"]``, both inclusive. Naive datetimes are taken as UTC. A point without
    the field never matches a condition on it.
    """

    session_id: int | None = None
    since: datetime | None = None
    until: datetime | None = None

    @property
    def is_empty(self) -> bool:
        return self.session_id is None and self.since is None and self.until is None

    def matches(self, payload: Mapping[str, Any]) -> bool:
        """The reference semantics of the filter; every adapter must agree with it."""
        if self.session_id is not None and payload.get(SESSION_ID_FIELD) != self.session_id:
            return False
        if self.since is None and self.until is None:
            return True
        created = payload.get(CREATED_AT_FIELD)
        if not isinstance(created, str):
            return False
        moment = parse_timestamp(created)
        if self.since is not None and moment < as_utc(self.since):
            return False
        return not (self.until is not None and moment > as_utc(self.until))


def as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def point_payload(created_at: str, session_id: int | None = None) -> dict[str, Any]:
    """The payload the embedding worker stores with a point (``session_id`` only for
    episodes and summaries)."""
    payload: dict[str, Any] = {CREATED_AT_FIELD: created_at}
    if session_id is not None:
        payload[SESSION_ID_FIELD] = session_id
    return payload


def normalized(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length (a zero vector stays zero), as cosine indexes store it."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:
        return [0.0 for _ in vector]
    return [x / norm for x in vector]


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of the angle between two vectors of equal size; 0.0 when either is zero."""
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norms if norms else 0.0


# ---- stored embeddings and provenance ---------------------------------------------------------

def encode_vector(vector: Sequence[float]) -> bytes:
    """A vector as the store keeps it: scaled to unit length (cosine ignores length), then
    float16 little-endian.

    Measured at 384-d (bench/index_bench.py): float16 rows take ~840 bytes in SQLite against
    ~2,070 for float32 (a 4 KiB page holds five 768-byte rows but only two 1,536-byte ones). A
    unit vector's components lose at most ~5e-4 each, which moves cosine scores by ~1e-4 and does
    not reorder real neighbours.
    """
    unit = normalized(vector)
    return struct.pack(f"<{len(unit)}e", *unit)


def decode_vector(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 2}e", blob))


@dataclass(frozen=True, slots=True)
class ModelRef:
    """Which embedder made a set of vectors: what the index manifest records per generation."""

    embedder: str
    model: str
    dimension: int
    distance: str = DISTANCE

    def describe(self) -> str:
        return f"{self.embedder}:{self.model} ({self.dimension}-d {self.distance})"


@dataclass(frozen=True, slots=True)
class PointBatch:
    """Points for a bulk build, vectors packed as consecutive ``encode_vector`` blobs (float16):
    a build streams millions of them, and decoding each into Python floats in the service only to
    encode them again for the engine would cost more than the build itself."""

    ids: Sequence[int]
    payloads: Sequence[Mapping[str, Any]]
    vectors: bytes
    dimension: int

    def points(self) -> list[VectorPoint]:
        flat = decode_vector(self.vectors)
        d = self.dimension
        return [VectorPoint(pid, flat[i * d:(i + 1) * d], payload)
                for i, (pid, payload) in enumerate(zip(self.ids, self.payloads, strict=True))]
