"""Vector-index values and the one place for the collections' shape (names, size, distance).

Every adapter and the container read these constants; no other module repeats ``768`` or
``"cosine"``. Points carry a small payload so the index can filter without a round trip to
SQLite: ``{"sessionId": int, "createdAt": "<ISO-8601 UTC ms>"}`` for episodes and summaries,
``{"createdAt": ...}`` for entities (they belong to no session); plus the owner (``userId``, and
``agentId`` for episodes and summaries) when there is one, and ``metadata``: the record's top-level
metadata keys whose values are strings, numbers or booleans (what an index-side metadata condition
can test; arrays, objects and nulls are left out, and no condition that needs them goes into the
index — see ``index_part``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from domain.filters import Condition, MetadataFilter
from domain.models import parse_timestamp
from domain.record_kinds import NAMES

COLLECTIONS: tuple[str, ...] = NAMES  # one vector collection per record kind
DEFAULT_DIMENSION = 768  # nomic-embed-text; EMBEDDING_DIM overrides it
DISTANCE = "cosine"

SESSION_ID_FIELD = "sessionId"
CREATED_AT_FIELD = "createdAt"
USER_ID_FIELD = "userId"
AGENT_ID_FIELD = "agentId"
METADATA_FIELD = "metadata"
EXACT_INTEGER = 2**53  # beyond this an index compares numbers as doubles, inexactly


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
    ``payload["createdAt"]``, both inclusive. Naive datetimes are taken as UTC. ``user_id`` and
    ``agent_id`` match ``payload["userId"]`` / ``payload["agentId"]``. ``metadata`` holds conditions
    on ``payload["metadata"]`` with the semantics of ``MetadataFilter.matches``, and only conditions
    for which ``indexable`` holds (the rest are checked on the loaded records). A point without the
    field never matches a condition on it.
    """

    session_id: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    user_id: str | None = None
    agent_id: str | None = None
    metadata: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        if not all(indexable(c) for c in self.metadata):
            raise ValueError("a VectorFilter holds only indexable metadata conditions (see index_part)")

    @property
    def is_empty(self) -> bool:
        return (self.session_id is None and self.since is None and self.until is None and self.user_id is None
                and self.agent_id is None and not self.metadata)

    def matches(self, payload: Mapping[str, Any]) -> bool:
        """The reference semantics of the filter; every adapter must agree with it."""
        if self.session_id is not None and payload.get(SESSION_ID_FIELD) != self.session_id:
            return False
        if self.user_id is not None and payload.get(USER_ID_FIELD) != self.user_id:
            return False
        if self.agent_id is not None and payload.get(AGENT_ID_FIELD) != self.agent_id:
            return False
        if self.metadata and not MetadataFilter(self.metadata).matches(payload.get(METADATA_FIELD) or {}):
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


def point_payload(
    created_at: str, session_id: int | None = None, user_id: str | None = None, agent_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The payload the embedding worker stores with a point (``session_id`` only for
    episodes and summaries); absent values are left out."""
    payload: dict[str, Any] = {CREATED_AT_FIELD: created_at}
    if session_id is not None:
        payload[SESSION_ID_FIELD] = session_id
    if user_id is not None:
        payload[USER_ID_FIELD] = user_id
    if agent_id is not None:
        payload[AGENT_ID_FIELD] = agent_id
    scalars = {k: v for k, v in (metadata or {}).items() if isinstance(v, (str, int, float, bool))}
    if scalars:
        payload[METADATA_FIELD] = scalars
    return payload


def _exact_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= EXACT_INTEGER


def indexable(condition: Condition) -> bool:
    """Whether a vector index can test ``condition`` exactly as ``MetadataFilter.matches`` does,
    given payload metadata of scalars only: equality with strings (any number of them) or with one
    number (a closed range, so 1 equals 1.0); number ranges. Not: booleans (the Qdrant Edge binding
    passes ``True`` to the engine as the integer 1, so it would match 1 and miss true), ``exists``
    (arrays and nulls are not in the payload), string ranges (indexes range over numbers),
    several numbers (integer matching would miss 1.0), numbers beyond 2**53 (doubles), and keys
    with ``"`` or ``\\`` (a Qdrant path quotes a key in double quotes and has no escape)."""
    c = condition
    if c.exists is not None or '"' in c.key or "\\" in c.key:
        return False
    if c.equals is not None:
        strings = all(isinstance(v, str) for v in c.equals)
        one_number = len(c.equals) == 1 and _exact_number(c.equals[0])
        if not (strings or one_number):
            return False
    bounds = [b for b in (c.gt, c.gte, c.lt, c.lte) if b is not None]
    return all(_exact_number(b) for b in bounds)


def index_part(flt: MetadataFilter | None) -> tuple[tuple[Condition, ...], MetadataFilter]:
    """``flt`` split into the conditions an index applies and the rest (checked on records)."""
    if not flt:
        return (), MetadataFilter()
    inside = tuple(c for c in flt.conditions if indexable(c))
    return inside, MetadataFilter(tuple(c for c in flt.conditions if not indexable(c)))


def payload_key(key: str) -> str:
    """The Qdrant JSON path of a metadata key: quoted, so dots and other characters are literal."""
    return f'{METADATA_FIELD}."{key}"'


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
    # numpy does the arithmetic of ``normalized`` and ``struct``'s "e" packing element for element
    # (IEEE products and quotients, float64 -> float16 rounding half to even), with the norm summed
    # by the same ``fsum``: the bytes are the same, at ~30 instead of ~70 us per 384-d vector (the
    # service encodes every vector it stores). A test keeps the plain form and compares.
    values = np.asarray(vector, dtype=np.float64)
    norm = math.sqrt(math.fsum((values * values).tolist()))
    if norm == 0.0:
        return bytes(2 * len(values))  # float16 zeros
    return (values / norm).astype("<f2").tobytes()


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
