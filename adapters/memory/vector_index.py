"""InMemoryVectorIndex: exact cosine search in plain Python, the VectorIndex test double.

It is the reference the contract suite checks the Qdrant adapters against, so it favours being
obviously right over being fast (fine up to a few thousand points).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from domain.errors import DimensionMismatch, VectorIndexError
from domain.vectors import PointBatch, VectorFilter, VectorHit, VectorPoint, normalized


@dataclass
class _Collection:
    dimension: int
    points: dict[int, tuple[list[float], Mapping[str, Any]]] = field(default_factory=dict)


class InMemoryVectorIndex:
    """A ``VectorIndex`` held in a dict; nothing survives ``close()``."""

    persistent = False

    def __init__(self) -> None:
        self._collections: dict[str, _Collection] = {}
        self._aliases: dict[str, str] = {}
        self._closed = False

    async def ensure_collection(self, name: str, dimension: int) -> None:
        self._check_open()
        existing = self._collections.get(name)
        if existing is None:
            self._collections[name] = _Collection(dimension)
        elif existing.dimension != dimension:
            raise DimensionMismatch(name, existing.dimension, dimension)

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        target = self._collection(collection)
        for point in points:
            self._check_size(collection, target, point.vector)
        for point in points:
            target.points[point.id] = (normalized(point.vector), dict(point.payload))

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        score_threshold: float | None = None,
    ) -> list[VectorHit]:
        target = self._collection(collection)
        self._check_size(collection, target, vector)
        query = normalized(vector)
        hits = []
        for point_id, (stored, payload) in target.points.items():
            if filter is not None and not filter.matches(payload):
                continue
            score = math.fsum(a * b for a, b in zip(query, stored, strict=True))
            if score_threshold is None or score >= score_threshold:
                hits.append(VectorHit(point_id, score))
        hits.sort(key=lambda hit: (-hit.score, hit.id))
        return hits[: max(limit, 0)]

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        target = self._collection(collection)
        for point_id in ids:
            target.points.pop(point_id, None)

    async def delete_by_filter(self, collection: str, filter: VectorFilter) -> None:
        target = self._collection(collection)
        if filter.is_empty:
            raise VectorIndexError(f"refusing to delete every point of {collection!r}: the filter is empty")
        doomed = [pid for pid, (_, payload) in target.points.items() if filter.matches(payload)]
        for point_id in doomed:
            del target.points[point_id]

    async def count(self, collection: str) -> int:
        return len(self._collection(collection).points)

    async def retrieve_vectors(self, collection: str, ids: Sequence[int]) -> dict[int, list[float]]:
        target = self._collection(collection)
        return {pid: list(target.points[pid][0]) for pid in ids if pid in target.points}

    async def collections(self) -> list[str]:
        self._check_open()
        return sorted(self._collections)

    async def drop_collection(self, name: str, keep: bool = False) -> None:
        self._check_open()
        self._collections.pop(name, None)
        self._aliases = {alias: target for alias, target in self._aliases.items() if target != name}

    async def aliases(self) -> dict[str, str]:
        self._check_open()
        return dict(self._aliases)

    async def point_alias(self, alias: str, collection: str) -> None:
        self._check_open()
        if collection not in self._collections:
            raise VectorIndexError(f"cannot point alias {alias!r} at {collection!r}: no such collection")
        if alias in self._collections:
            raise VectorIndexError(f"cannot point alias {alias!r} at {collection!r}: a collection has that name")
        self._aliases[alias] = collection

    async def build_collection(self, name: str, dimension: int, batches: AsyncIterator[PointBatch]) -> None:
        self._check_open()
        if name in self._collections:
            raise VectorIndexError(f"cannot build vector collection {name!r}: it exists")
        building = _Collection(dimension)
        async for batch in batches:
            for point in batch.points():
                self._check_size(name, building, point.vector)
                building.points[point.id] = (normalized(point.vector), dict(point.payload))
        self._collections[name] = building

    async def point_ids(self, collection: str) -> list[int]:
        return sorted(self._collection(collection).points)

    async def rebuild_advised(self, collection: str) -> bool:
        self._collection(collection)
        return False

    def disk_low(self) -> str | None:
        return None

    async def health(self) -> str | None:
        return "the vector index is closed" if self._closed else None

    async def close(self) -> None:
        self._closed = True
        self._collections.clear()

    def _collection(self, name: str) -> _Collection:
        self._check_open()
        try:
            return self._collections[self._aliases.get(name, name)]
        except KeyError:
            raise VectorIndexError(f"vector collection {name!r} does not exist") from None

    def _check_open(self) -> None:
        if self._closed:
            raise VectorIndexError("the vector index is closed")

    @staticmethod
    def _check_size(name: str, target: _Collection, vector: Sequence[float]) -> None:
        if len(vector) != target.dimension:
            raise VectorIndexError(
                f"vector of size {len(vector)} does not fit collection {name!r} (size {target.dimension})"
            )
