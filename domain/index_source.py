"""Reading the store for the index manager: stored embeddings made where missing, streamed into
a build, or copied onto a collection (catch-up after a build, repair after a verification)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from domain.errors import DomainError, VectorIndexError
from domain.index_status import CATCHING_UP, INDEXING, CollectionState, Progress
from domain.vectors import ModelRef, PointBatch, VectorFilter, encode_vector
from ports.embedder import Embedder
from ports.index_catalog import IndexCatalog, StoredEmbeddings
from domain.record_kinds import KINDS
from ports.store import Store
from ports.vector_index import VectorIndex

log = logging.getLogger("nexusai.index")

BUILD_BATCH = 1024
# Points copied from the store (catch-up, replay, repair) are decoded into Python floats on the
# event loop, ~20 us a 384-d point: 128 at a time holds requests up for a few ms, not ~30 ms.
COPY_BATCH = 128
EMBED_PAGE = 256
RETRY_SECONDS = 5.0


class StoreSource:
    """The store side of builds and repairs (a base of ``IndexManager``, which sets these)."""

    _index: VectorIndex
    _catalog: IndexCatalog
    _embeddings: StoredEmbeddings
    _store: Store
    _embedder: Embedder
    _model_id: int
    _next_verify: float
    model: ModelRef
    replayed: int

    async def _embed_missing(self, state: CollectionState) -> None:
        """Give every record a stored embedding by the configured model: copied from the live
        generation when it was made by the same model, embedded otherwise (resumable: what is
        stored stays stored)."""
        missing = await self._embeddings.missing_embeddings(state.name, self._model_id)
        if not missing:
            return
        state.progress = progress = Progress("embedding", missing)
        after = 0
        while rows := await self._embeddings.embedding_rows(state.name, self._model_id, after, EMBED_PAGE):
            after = rows[-1].id
            need = [r.id for r in rows if r.vector is None]
            if need:
                vectors = await self._vectors_for(state, need, progress)
                await self._embeddings.store_embeddings(
                    state.name, self._model_id, [(i, encode_vector(v)) for i, v in vectors.items()])
                progress.done += len(need)

    async def _vectors_for(self, state: CollectionState, ids: list[int], progress: Progress | None) -> dict[int, Any]:
        vectors: dict[int, Any] = {}
        if state.usable and state.active is not None and state.active.model_id == self._model_id:
            try:
                vectors = await self._index.retrieve_vectors(state.active.physical, ids)
            except VectorIndexError:
                vectors = {}
        rest = [i for i in ids if i not in vectors]
        items = await self._load(state.name, rest) if rest else []
        size = max(1, self._embedder.max_batch)
        for start in range(0, len(items), size):
            vectors.update(await self._embed_chunk(items[start:start + size], progress))
        return vectors

    async def _embed_chunk(self, chunk: list, progress: Progress | None) -> dict[int, Any]:
        """Embed ``chunk``, waiting while the embedder is down (the build resumes where it was).
        When the embedder answers its probe but refuses the chunk, records go one at a time and
        those it refuses alone are left out (a poison record must not hold a build forever;
        the outbox dead-letters it, and verification does not count it)."""
        while True:
            try:
                made = await self._embedder.embed([item.text for item in chunk])
                if progress is not None:
                    progress.waiting = None
                return {item.id: vector for item, vector in zip(chunk, made, strict=True)}
            except DomainError as error:
                if progress is not None:
                    progress.waiting = f"the embedder failed: {error.message}"
                if (await self._embedder.probe()).reachable:
                    return await self._one_by_one(chunk)
                await asyncio.sleep(RETRY_SECONDS)

    async def _one_by_one(self, chunk: list) -> dict[int, Any]:
        found: dict[int, Any] = {}
        for item in chunk:
            try:
                found[item.id] = (await self._embedder.embed([item.text]))[0]
            except DomainError as error:
                log.warning("%s %d left out of the index build: the embedder refuses it (%s)",
                            type(item).__name__.lower(), item.id, error.message)
        return found

    async def _load(self, name: str, ids: list[int]) -> list:
        return await KINDS[name].load(self._store, ids)

    async def _batches(self, state: CollectionState) -> AsyncIterator[PointBatch]:
        after, pages, streamed = 0, 0, 0
        while True:
            # While a page is read every write counts as made behind the stream (the read may not
            # see it); once read, only writes to ids up to its last one do: the stream reads the
            # rest itself, so the catch-up after the build replays no more than it must.
            state.streamed_to = None
            rows = await self._embeddings.embedding_rows(state.name, self._model_id, after, BUILD_BATCH)
            if not rows:
                break
            after = state.streamed_to = rows[-1].id
            ready = [r for r in rows if r.vector is not None]
            streamed += len(ready)
            if (progress := state.progress) is not None:
                progress.done += len(rows)
                pages += 1
                if progress.done > progress.total or pages % 16 == 0:  # rows keep arriving meanwhile
                    counted = (await self._store.operations.counts()).get(state.name, 0)
                    progress.total = max(progress.done, counted)
            if ready:
                yield PointBatch([r.id for r in ready], [r.payload for r in ready],
                                 b"".join(r.vector for r in ready if r.vector), self.model.dimension)
        if state.progress is not None:  # everything is streamed; the backend builds its graph
            state.progress = Progress(INDEXING, streamed, streamed)

    async def _copy_from_store(self, name: str, physical: str, ids: Sequence[int]) -> None:
        rows = await self._embeddings.embeddings_of(name, self._model_id, ids) if ids else []
        ready = [r for r in rows if r.vector is not None]
        for start in range(0, len(ready), COPY_BATCH):
            chunk = ready[start:start + COPY_BATCH]
            batch = PointBatch([r.id for r in chunk], [r.payload for r in chunk],
                               b"".join(r.vector for r in chunk if r.vector), self.model.dimension)
            await self._index.upsert(physical, batch.points())
        # Gone from the store, or its text changed and its job is still queued: no stale point.
        await self._index.delete(physical, sorted(set(ids) - {r.id for r in ready}))

    async def _replay_changes(self, name: str, physical: str, since: int) -> int:
        """Copy onto ``physical`` from the store every record of ``name`` changed after change-feed
        position ``since``, whichever process changed it, and remove the points of sessions deleted
        since; returns how many records were replayed.

        Other processes serving the store wrote into the generation that served while a build
        ran, and the building process never saw those writes; the change feed in the store did.
        Run after the switch: from then on every process writes into the new generation (through
        the alias), so a write is either in the store when this reads it or lands there itself.
        A feed trimmed past ``since`` no longer says what changed: every record is copied."""
        events = self._store.events
        oldest, _ = await events.bounds()
        sessions: set[int] = set()
        if oldest > since + 1:
            ids = set(await self._embeddings.row_ids(name))
        else:
            ids, seq = set(), since
            while page := await events.after(seq, BUILD_BATCH):
                for event in page:
                    if event.kind == name:
                        ids.add(event.record_id)
                    elif event.kind == "sessions" and event.op == "deleted" and KINDS[name].in_sessions:
                        sessions.add(event.record_id)
                seq = page[-1].seq
        ordered = sorted(ids)
        for start in range(0, len(ordered), BUILD_BATCH):
            await self._copy_from_store(name, physical, ordered[start:start + BUILD_BATCH])
        for session_id in sorted(sessions):
            await self._index.delete_by_filter(physical, VectorFilter(session_id=session_id))
        return len(ordered)

    async def _catch_up(self, state: CollectionState, physical: str, rounds: int = 8) -> None:
        """Replay onto ``physical`` the writes made behind the build's stream since it started,
        page by page with "catching up N of M writes" as progress (M grows while writes keep
        coming); up to ``rounds`` passes while each leaves more than a page of new ones."""
        progress = state.progress if state.progress is not None and state.progress.phase == CATCHING_UP else None
        if progress is None:
            progress = state.progress = Progress(CATCHING_UP, 0)
        for _ in range(rounds):
            ids, filters = sorted(state.dirty or ()), state.dirty_filters
            state.dirty, state.dirty_filters = set(), []
            progress.total += len(ids) + len(filters)
            for start in range(0, len(ids), BUILD_BATCH):
                chunk = ids[start:start + BUILD_BATCH]
                await self._copy_from_store(state.name, physical, chunk)
                progress.done += len(chunk)
                self.replayed += len(chunk)
            for flt in filters:
                await self._index.delete_by_filter(physical, flt)
                progress.done += 1
            if len(state.dirty) + len(state.dirty_filters) <= BUILD_BATCH:
                return

    async def _replay_others(self, state: CollectionState, physical: str, since: int) -> None:
        try:
            replayed = await self._replay_changes(state.name, physical, since)
        except (VectorIndexError, DomainError) as error:
            # The generation serves already; verification repairs what a replay could not.
            log.warning("replaying other processes' writes onto %s failed: %s", physical, error.message)
            self._next_verify = 0.0
            return
        self.replayed += replayed
