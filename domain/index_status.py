"""What the index manager knows about each collection, and the status object /health and /metrics
read from it (consistent, verifying, rebuilding with progress and ETA, diverged, unavailable,
disk low)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from domain.vectors import VectorFilter
from ports.index_catalog import Generation

# States a collection can be in; only the first two serve vector search.
CONSISTENT = "consistent"
VERIFYING = "verifying"
REBUILDING = "rebuilding"
DIVERGED = "diverged"
UNAVAILABLE = "unavailable"
DEGRADED_STATES = frozenset({REBUILDING, DIVERGED, UNAVAILABLE})


# The phases of a build, in order. "indexing" has no ETA: the engine builds its search graph and
# reports no progress, so saying "100 %, ETA 0 s" for its (at 1M, long) duration would be a lie.
EMBEDDING, BUILDING, INDEXING, CATCHING_UP = "embedding", "building", "indexing", "catching up"


@dataclass
class Progress:
    phase: str  # one of the phases above
    total: int
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    waiting: str | None = None  # why the build is paused (embedder down, disk low), if it is

    def eta_seconds(self) -> float | None:
        elapsed = time.monotonic() - self.started
        if self.phase == INDEXING or self.done <= 0 or elapsed <= 0:
            return None
        return round(max(0, self.total - self.done) * elapsed / self.done, 1)

    def percent(self) -> float:
        """Of this phase; in "indexing" the stream is whole (100) and the graph's share unknown."""
        return round(min(100.0, 100 * self.done / self.total), 1) if self.total else 100.0

    def describe(self) -> str:
        eta = self.eta_seconds()
        if self.phase == INDEXING:
            text = f"indexing {self.total} points (the engine builds its search graph; no ETA)"
        elif self.phase == CATCHING_UP:
            text = f"catching up {self.done} of {self.total} writes made during the build ({self.percent():.0f}%)"
        else:
            text = f"{self.phase} {self.done}/{self.total} ({self.percent():.0f}%)"
        text += f", ETA {eta:.0f} s" if eta is not None else ""
        return text + (f", waiting: {self.waiting}" if self.waiting else "")

    def as_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "done": self.done, "total": self.total, "percent": self.percent(),
                "etaSeconds": self.eta_seconds(), "waiting": self.waiting, "text": self.describe()}


@dataclass
class CollectionState:
    """One logical collection: the generation that serves it and the one being built."""

    name: str
    active: Generation | None = None
    usable: bool = False  # the active generation is open and made by the configured model
    state: str = VERIFYING
    building: Generation | None = None
    progress: Progress | None = None
    wanted: str | None = None  # the reason a new generation is due, until its build starts
    reason: str | None = None  # why the collection is not consistent
    # Writes made while a generation is being built, applied to it before the switch: only those
    # behind the build's stream (ids at or below ``streamed_to``; every id while a page is being
    # read, i.e. ``None``), since the stream reads the rest from the store itself.
    dirty: set[int] | None = None
    streamed_to: int | None = None
    dirty_filters: list[VectorFilter] = field(default_factory=list)
    points: int | None = None
    rows: int | None = None
    alias: str | None = None  # the backend's stable name for the active generation, once pointed
    verified_at: float | None = None

    def unavailable_message(self) -> str:
        if self.building is not None and self.progress is not None:
            return (f"the {self.name} index is being rebuilt ({self.building.reason}): "
                    f"{self.progress.describe()}")
        return f"the {self.name} index is unavailable: {self.reason or 'no generation is built yet'}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "generation": self.active.physical if self.active else None,
            "alias": self.alias,
            "model": self.active.model.describe() if self.active else None,
            "points": self.points,
            "rows": self.rows,
            "reason": self.reason,
            "building": self.building.physical if self.building else None,
            "progress": self.progress.as_dict() if self.progress else None,
        }


def overall(states: list[CollectionState], disk_low: str | None) -> str:
    """One word for the whole index: the worst of its collections, or "disk low"."""
    if disk_low:
        return "disk low"
    for word in (UNAVAILABLE, DIVERGED, REBUILDING, VERIFYING):
        if any(s.state == word for s in states):
            return word
    return CONSISTENT
