"""The ``VectorIndex`` port on the logical collection names (a base of ``IndexManager``): each
call goes to the physical collection of the active generation, or through its alias on a process
that follows another's maintenance; a write made while a build runs is also noted for the build's
catch-up, and one made while no generation serves is left to the build that will read it from the
store."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from domain.errors import VectorIndexError
from domain.index_status import CollectionState
from domain.vectors import ModelRef, VectorFilter, VectorHit, VectorPoint, encode_vector
from ports.index_catalog import StoredEmbeddings
from ports.vector_index import VectorIndex


class Serving:
    """Set by ``IndexManager``: the engine, the collection states, the lock writes share with
    catch-up, switch and repair, and whether this process maintains the index."""

    _index: VectorIndex
    _states: dict[str, CollectionState]
    _lock: asyncio.Lock
    _embeddings: StoredEmbeddings
    _model_id: int
    model: ModelRef
    maintaining: bool
    build_writes: int

    def _serving(self, collection: str) -> str:
        state = self._states.get(collection)
        if state is None:
            raise VectorIndexError(f"vector collection {collection!r} does not exist")
        if not state.usable or state.active is None:
            raise VectorIndexError(state.unavailable_message())
        return self._target(state, state.active.physical)

    def _target(self, state: CollectionState, physical: str) -> str:
        # A follower reads and writes through the alias: the maintaining process moves it at a
        # switch, and every process is on the new generation at once, with no manifest to re-read.
        return state.alias if not self.maintaining and state.alias else physical

    async def ensure_collection(self, name: str, dimension: int) -> None:
        """Collections are the manager's own: this only checks the name and the dimension."""
        if name not in self._states:
            raise VectorIndexError(f"vector collection {name!r} does not exist")
        if dimension != self.model.dimension:
            raise VectorIndexError(f"vector collection {name!r} holds {self.model.dimension}-d vectors, not {dimension}")

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        # The store keeps the embedding first: a build in progress, a repair or a lost index
        # rebuilds from it without the embedder.
        await self._embeddings.store_embeddings(collection, self._model_id, [(p.id, encode_vector(p.vector)) for p in points])
        await self._write(collection, {p.id for p in points}, None, lambda target: self._index.upsert(target, points))

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        if ids:
            await self._write(collection, set(ids), None, lambda target: self._index.delete(target, ids))

    async def delete_by_filter(self, collection: str, filter: VectorFilter) -> None:
        if filter.is_empty:
            raise VectorIndexError(f"refusing to delete every point of {collection!r}: the filter is empty")
        await self._write(collection, set(), filter, lambda target: self._index.delete_by_filter(target, filter))

    async def _write(self, collection: str, ids: set[int], flt: VectorFilter | None, action) -> None:
        state = self._states.get(collection)
        if state is None:
            raise VectorIndexError(f"vector collection {collection!r} does not exist")
        async with self._lock:
            if state.dirty is not None:  # a build runs: what its stream already passed is replayed
                streamed, self.build_writes = state.streamed_to, self.build_writes + len(ids)
                state.dirty.update(ids if streamed is None else (i for i in ids if i <= streamed))
                if flt is not None:
                    state.dirty_filters.append(flt)
            if state.usable and state.active is not None:
                await action(self._target(state, state.active.physical))
            elif state.building is None and state.wanted is None:
                raise VectorIndexError(state.unavailable_message())
            # else: the generation being built picks the write up from the store

    async def search(self, collection: str, vector: Sequence[float], limit: int,
                     filter: VectorFilter | None = None, score_threshold: float | None = None) -> list[VectorHit]:
        return await self._index.search(self._serving(collection), vector, limit, filter, score_threshold)

    async def count(self, collection: str) -> int:
        return await self._index.count(self._serving(collection))

    async def retrieve_vectors(self, collection: str, ids: Sequence[int]) -> dict[int, list[float]]:
        return await self._index.retrieve_vectors(self._serving(collection), ids)

    async def health(self) -> str | None:
        return await self._index.health()
