"""Verifying the vector collections against the store, repairing small drifts in place, and the
cheap count comparison that brings a verification forward (a base of ``IndexManager``)."""

from __future__ import annotations

import asyncio
import logging
import random

from domain.errors import VectorIndexError
from domain.index_source import StoreSource
from domain.index_status import CONSISTENT, DIVERGED, CollectionState
from domain.vectors import encode_vector
from ports.vector_index import CollectionAliases

log = logging.getLogger("nexusai.index")

# A verification finding more than this share of points missing rebuilds rather than patches.
REBUILD_SHARE = 0.25
SAMPLE = 32  # records whose points a verification with matching counts looks up


class Verification(StoreSource):
    """Set by ``IndexManager`` (which also gives ``_want``, ``_drop`` and ``_row_count``): the
    collection states, the lock writes share, and the wake-up."""

    _states: dict[str, CollectionState]
    _lock: asyncio.Lock
    _wake: asyncio.Event
    _next_verify: float
    _store_id: str
    _aliases: CollectionAliases | None
    repairs: int

    # ---- the stable name of each active generation (a Qdrant server's aliases) ---------------

    def alias_of(self, name: str) -> str:
        """The alias naming the active generation of ``name`` for other readers of the backend."""
        return f"{name}-{self._store_id}"

    async def _publish(self, state: CollectionState) -> None:
        """Point the collection's alias at its active generation if it names anything else (after
        a switch, or after a kill between the switch in the manifest and the alias swap). A
        failure is logged and healed by the next verification; searches here do not need it."""
        if self._aliases is None or not state.usable or state.active is None:
            return
        alias, physical = self.alias_of(state.name), state.active.physical
        try:
            if (await self._aliases.aliases()).get(alias) != physical:
                await self._aliases.point_alias(alias, physical)
                log.info("alias %s now names %s", alias, physical)
            state.alias = alias
        except VectorIndexError as error:
            state.alias = None
            log.warning("could not point alias %s at %s (retried at the next verification): %s",
                        alias, physical, error.message)

    # ---- verification ------------------------------------------------------------------------

    async def verify(self, name: str) -> str:
        """Compare one collection with the store and repair it; returns its state afterwards."""
        state = self._states[name]
        if not state.usable or state.active is None:
            return state.state
        await self._publish(state)
        if state.building is not None:
            return state.state
        physical = state.active.physical
        try:
            async with self._lock:
                state.points = await self._index.count(physical)
                state.rows = await self._row_count(name)
                pending = await self._embeddings.pending_ids(name)
                if state.points == state.rows and not pending and await self._sample_present(name, physical):
                    state.state, state.reason = CONSISTENT, None
                    return state.state
                points = set(await self._storage.point_ids(physical))
                records = set(await self._embeddings.row_ids(name))
                # Expired but not yet purged: searches skip them, and the worker does not embed a
                # record that expired before its turn, so their points may lawfully be absent.
                expired = await self._embeddings.expired_ids(name)
            missing, extra = records - points - pending - expired, points - records - pending
        except VectorIndexError as error:
            state.usable = False
            await self._drop(physical, keep=True)
            self._want(state, f"generation {physical} failed verification and was moved aside: {error.message}")
            return state.state
        if not missing and not extra:
            state.state, state.reason = CONSISTENT, None
            return state.state
        state.reason = f"{len(missing)} points missing and {len(extra)} extra against {len(records)} records"
        log.warning("vector collection %s diverged from the store: %s", name, state.reason)
        if len(missing) > max(100, REBUILD_SHARE * len(records)):
            state.state = DIVERGED
            self._want(state, f"diverged from the store ({state.reason})")
            return state.state
        state.state = DIVERGED
        await self._repair(state, sorted(missing), sorted(extra))
        return state.state

    async def _sample_present(self, name: str, physical: str) -> bool:
        """Equal counts can hide lost points replaced by stray ones: a few random records must
        have their points too (the cheap fingerprint; a miss leads to the full id comparison)."""
        ids = await self._embeddings.row_ids(name)
        sample = random.sample(ids, min(SAMPLE, len(ids)))
        return len(await self._index.retrieve_vectors(physical, sample)) == len(sample)

    async def _repair(self, state: CollectionState, missing: list[int], extra: list[int]) -> None:
        rows = await self._embeddings.embeddings_of(state.name, self._model_id, missing)
        need = [r.id for r in rows if r.vector is None]
        if need:  # records whose embeddings were never stored (e.g. before stored embeddings)
            vectors = await self._vectors_for(state, need, None)
            await self._embeddings.store_embeddings(
                state.name, self._model_id, [(i, encode_vector(v)) for i, v in vectors.items()])
        async with self._lock:
            if not state.usable or state.active is None:
                return
            await self._copy_from_store(state.name, state.active.physical, missing)
            await self._index.delete(state.active.physical, extra)
            state.points = await self._index.count(state.active.physical)
        self.repairs += 1
        state.state, state.reason = CONSISTENT, None
        log.info("repaired vector collection %s: %d points restored, %d removed", state.name, len(missing), len(extra))

    async def refresh(self) -> None:
        """Read current point and row counts into the status (cheap: one count per collection).

        A difference the outbox cannot explain (more than its queued jobs) marks the collection
        diverged and brings its verification forward: a shard emptied under a running service
        is repaired within a health interval, not at the next periodic verification. Records
        expired but not yet purged count among what explains a difference."""
        rows = await self._store.operations.counts()
        backlog = await self._store.outbox.backlog()
        queued = backlog.pending + getattr(backlog, "dead", 0)
        for state in self._states.values():
            state.rows = rows.get(state.name, 0)
            if state.usable and state.active is not None:
                try:
                    state.points = await self._index.count(state.active.physical)
                except VectorIndexError:
                    state.points = None
                # Records expired and not yet purged may lawfully lack points (see ``verify``), which
                # explains missing points, never extra ones; read only when the queue cannot explain.
                if state.points is not None and state.building is None and state.state == CONSISTENT and (
                        state.points - state.rows > queued or (
                            state.rows - state.points > queued
                            and state.rows - state.points > queued + len(await self._embeddings.expired_ids(state.name)))):
                    state.state = DIVERGED
                    state.reason = (f"{state.points} points against {state.rows} records with {queued} jobs "
                                    "queued; verifying and repairing")
                    self._next_verify = 0.0
                    self._wake.set()
