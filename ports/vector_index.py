"""The VectorIndex port: named collections of fixed-size vectors searched by cosine similarity."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from domain.vectors import VectorFilter, VectorHit, VectorPoint


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
        one (start-up stops on it: the fix is ``memory-service reindex`` or the right
        EMBEDDING_DIM). A location that cannot be opened (locked by another process, not
        writable) raises ``VectorIndexError`` saying so.
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
