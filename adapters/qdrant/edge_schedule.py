"""When a Qdrant Edge shard is due an HNSW index build, and where it is built.

The engine never optimizes on its own: new points land in plain segments that are searched
exactly until ``optimize()`` builds their HNSW index. A shard is due a build once the points
written to it since the last build (or open) reach ``max(optimize_every, optimize_growth *
points indexed then)``, so the total build cost of a bulk load stays a small multiple of one
build. Up to ``inline_points`` points a due shard is built in place on the engine thread
(milliseconds); above that the index manager is told (``rebuild_advised``) to build a new
generation in a child process (``edge_supervisor``) while the live shard keeps serving.

The schedule only counts: it is called on the engine thread, which serialises every call.
"""

from __future__ import annotations


class BuildSchedule:
    def __init__(self, *, optimize_every: int, optimize_growth: float, inline_points: int) -> None:
        self.optimize_every = optimize_every
        self._growth = optimize_growth
        self._inline_points = inline_points
        self._indexed: dict[str, int] = {}
        self._written: dict[str, int] = {}

    def opened(self, name: str, points: int, indexed_vectors: int) -> bool:
        """Start counting ``name`` (``points`` at open count as built); True when points written
        before a crash still sit in plain segments of a small shard and it should be built now."""
        self._written[name] = 0
        # Not the engine's indexed_vectors_count: segments below its indexing threshold never
        # count as indexed, so a small built shard would look due for a build forever.
        self._indexed[name] = points
        return self.inline(points) and points - indexed_vectors >= self.optimize_every

    def wrote(self, name: str, weight: int) -> bool:
        """Count ``weight`` written points; True when the shard is now due a build."""
        self._written[name] = self._written.get(name, 0) + weight
        return self.due(name)

    def built(self, name: str, points: int) -> None:
        self._written[name] = 0
        self._indexed[name] = points

    def forget(self, name: str) -> None:
        self._written.pop(name, None)
        self._indexed.pop(name, None)

    def due(self, name: str) -> bool:
        due = max(self.optimize_every, self._growth * self._indexed.get(name, 0))
        return self._written.get(name, 0) >= due

    def inline(self, points: int) -> bool:
        """Whether a shard of ``points`` is small enough to build in place."""
        return points <= self._inline_points

    def rebuild_advised(self, name: str, points: int) -> bool:
        """A large shard due a build: worth a new generation built aside."""
        return not self.inline(points) and self.due(name)
