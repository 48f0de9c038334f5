"""The vector-index ports: named collections of fixed-size vectors searched by cosine similarity.

``VectorIndex`` is what the services use (write, search, count); ``IndexStorage`` is what the index
manager alone needs to build, verify and replace collections beside the live ones. Every backend
implements both (one object plays both roles); the contract suite checks both on each backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from domain.vectors import PointBatch, VectorFilter, VectorHit, VectorPoint


class VectorIndex(Protocol):
    """Where the embeddings of episodes, entities and summaries live (Qdrant Edge, a Qdrant
    server, or the in-memory double).

    Collections are created by ``ensure_collection`` before any other call names them; every
    method on a collection that was never ensured (and does not exist in the backend) raises
    ``domain.errors.VectorIndexError``. Every backend failure surfaces as ``VectorIndexError``
    with a message naming the collection and the operation; nothing else escapes, except from
    ``health``, which never raises. Point ids are the SQLite row ids (positive integers).

    ``persistent`` says whether points survive ``close()`` and reopening the same location
    (true for Qdrant Edge and a Qdrant server; false for the in-memory double and qdrant-client
    local mode).
    """

    persistent: bool

    async def ensure_collection(self, name: str, dimension: int) -> None:
        """Create collection ``name`` for vectors of ``dimension`` floats with cosine distance.

        Contract: idempotent: calling it again with the same dimension changes nothing and keeps
        the points. When the collection exists with another vector size it raises
        ``VectorIndexError`` whose message names the collection, its size and the configured
        one (``domain.errors.DimensionMismatch``; the index manager then builds a new
        generation). A location that cannot be opened (locked by another process, not
        writable, corrupted) raises ``VectorIndexError`` saying so.
        """
        ...

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """Store points; when this returns they are visible to ``search`` and ``count``.

        Contract: idempotent: a point with an id already stored replaces that point's vector and
        payload (no duplicate). An empty sequence is a no-op. A vector of the wrong size raises
        ``VectorIndexError``.
        """
        ...

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        score_threshold: float | None = None,
    ) -> list[VectorHit]:
        """The points nearest to ``vector`` by cosine similarity.

        Contract: at most ``limit`` hits, best first (score descending); ``score`` is the cosine
        similarity of the query and the stored vector (float tolerance ~1e-5); only points that
        match ``filter`` (see ``VectorFilter``) are returned; with ``score_threshold`` only hits
        scoring at least that are returned. An empty collection returns ``[]``. Approximate
        indexes keep recall high but may differ from exact search among near-ties.
        """
        ...

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        """Remove the points with these ids. Contract: unknown ids are a no-op; so is ``[]``."""
        ...

    async def delete_by_filter(self, collection: str, filter: VectorFilter) -> None:
        """Remove every point matching ``filter`` and no other point (a session delete removes
        its episodes' and summaries' points with ``VectorFilter(session_id=...)``).

        Contract: a filter with no condition raises ``VectorIndexError`` rather than emptying the
        collection; matching nothing is a no-op.
        """
        ...

    async def count(self, collection: str) -> int:
        """The exact number of points stored in the collection."""
        ...

    async def retrieve_vectors(self, collection: str, ids: Sequence[int]) -> dict[int, list[float]]:
        """The stored vectors of these ids, for rankers that compare candidates (MMR).

        Contract: maps each stored id to its vector, scaled to unit length (cosine indexes keep
        them normalised); unknown ids are absent from the result.
        """
        ...

    async def health(self) -> str | None:
        """``None`` when the index answers, else a one-line reason. Never raises."""
        ...

    async def close(self) -> None:
        """Flush pending writes and release files, threads and connections. Calling it twice is
        harmless; no other method may be called afterwards."""
        ...


class IndexStorage(Protocol):
    """The engine-side operations behind generations: list, build, verify and drop collections,
    and say when the volume is too full for them. Same errors as ``VectorIndex``."""

    async def collections(self) -> list[str]:
        """The names of every collection stored at this location (ensured or not)."""
        ...

    async def drop_collection(self, name: str, keep: bool = False) -> None:
        """Remove collection ``name`` and its points; a name that does not exist is a no-op.

        With ``keep`` a backend that stores files moves them aside for inspection instead of
        deleting them (a corrupted or foreign collection); others delete. Never raises for a
        collection that cannot be opened: dropping is how such a collection is got rid of.
        """
        ...

    async def build_collection(self, name: str, dimension: int, batches: AsyncIterator[PointBatch]) -> None:
        """Create collection ``name`` (which must not exist) holding the points of ``batches``,
        fully indexed, then open it as ``ensure_collection`` would.

        Contract: nothing else reads or writes ``name`` until this returns; a build that fails
        raises ``VectorIndexError`` and may leave a partial collection that ``drop_collection``
        removes. Heavy work stays off the caller's event loop (an embedded engine builds in a
        child process that cannot outlive this one).
        """
        ...

    async def point_ids(self, collection: str) -> list[int]:
        """Every point id stored in the collection, ascending (verification against the store)."""
        ...

    async def rebuild_advised(self, collection: str) -> bool:
        """True when enough points wait outside the search index that building the collection
        afresh is worth it (an embedded engine that never optimizes on its own); backends that
        maintain their indexes themselves always say False."""
        ...

    def disk_low(self) -> str | None:
        """``None`` while the index volume has room for the next writes and a build, else a
        one-line reason; writes refuse with ``VectorIndexError`` meanwhile (they wait in the
        outbox). Backends without a local volume always say ``None``."""
        ...


@runtime_checkable
class CollectionAliases(Protocol):
    """Stable names for the active generations, on backends that other processes read (a Qdrant
    server: several service processes, replicas, an operator's tools). The index manager names
    each logical collection ``<name>-<store id>`` and points it at the active generation; a
    generation switch moves the alias in one atomic step, so a reader of the alias sees the old
    generation or the new one, complete, never a half-built one and never none. Backends only
    this process reads (Qdrant Edge) do not offer it: the manifest in the store is enough there.
    Same errors as ``VectorIndex``.
    """

    async def aliases(self) -> dict[str, str]:
        """Every alias at this location and the collection it names."""
        ...

    async def point_alias(self, alias: str, collection: str) -> None:
        """Make ``alias`` name ``collection`` (which must exist), replacing what it named before
        in one atomic step. Contract: the alias then reads as the collection (search, count);
        dropping the collection removes the alias with it; an alias cannot take the name of a
        collection (``VectorIndexError``)."""
        ...
