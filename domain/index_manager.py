"""The vector index as a self-healing cache of the store.

``IndexManager`` is the vector index the services see: it maps each logical collection
(episodes, entities, summaries) to the physical collection of its active *generation*, recorded
with the model that made its vectors in the store's index manifest. Nothing derived is trusted
blindly and nothing derived stops the service:

- At start-up a generation made by another model or dimension, a missing, unopenable or corrupted
  collection, or none at all, is not an error: the collection answers "unavailable" (searches fall
  back to keywords and say why, with progress) while a new generation is built in the background.
- A build first makes sure every record has a stored embedding by the configured model (reusing
  the live index's vectors where the model is the same, embedding only the rest), then streams
  the stored embeddings into a new physical collection (the backend builds it out of this
  process). The live generation keeps serving and taking writes; writes made meanwhile behind the
  stream are replayed onto the new one before the switch ("catching up N of M writes", with its
  own ETA), which is one transaction in the manifest, then (on a backend others read: a Qdrant
  server) one atomic alias swap. The old generation is dropped after it. A kill at any moment
  leaves either the old or the new generation active; the next start points the alias at the
  active one first, then drops the leftovers.
- Periodically (and at start-up) each collection is compared with the store: counts first, the
  ids when the counts differ; small differences are repaired in place, large ones rebuilt.
- Large embedded collections are re-indexed the same way when the backend advises it, so
  maintenance never takes a collection offline.
- Several processes may serve one store (a Qdrant server as the index): each one's manager
  serves and writes, but only the holder of the store's ``MaintenanceLock`` builds, verifies,
  repairs and switches generations. The others follow the manifest (every ``check_seconds``) and
  take the maintenance over when the holder goes. On a backend with aliases they search and write
  through the alias, so a switch moves them all at once. Their writes during a build went to the
  old generation: after the switch the maintaining process replays onto the new one every record
  the store's change feed shows changed since the build began.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any, cast

from domain.errors import VectorIndexError
from domain.index_status import (
    BUILDING, CONSISTENT, DEGRADED_STATES, REBUILDING, UNAVAILABLE, VERIFYING, CollectionState, Progress,
    overall,
)
from domain.index_source import RETRY_SECONDS, StoreSource
from domain.index_serving import Serving
from domain.index_verify import Verification
from domain.vectors import COLLECTIONS, ModelRef
from ports.embedder import Embedder
from ports.index_catalog import Generation, IndexCatalog, StoredEmbeddings
from ports.maintenance import MaintenanceLock
from ports.store import Store
from ports.vector_index import CollectionAliases, IndexStorage, VectorIndex

log = logging.getLogger("nexusai.index")


class IndexManager(Serving, Verification, StoreSource):
    """Generations, builds, verification and repair of the vector collections.

    ``start()`` decides each collection's state without waiting for any build; ``run()`` is the
    background task that builds, verifies (every ``verify_seconds``) and watches for maintenance
    (every ``check_seconds``). The search/write methods (``Serving``) follow the ``VectorIndex``
    port on the logical collection names.
    """

    def __init__(
        self, index: VectorIndex, catalog: IndexCatalog, store: Store, embedder: Embedder,
        embedder_kind: str, *, verify_seconds: float = 300.0, check_seconds: float = 5.0,
        storage: IndexStorage | None = None, lock: MaintenanceLock | None = None,
    ) -> None:
        self._index = index
        self._maintenance = lock  # None: this process alone serves the store
        self.maintaining = False
        # Builds, verification and drops go to the engine's storage side: by default the same
        # object, since every backend implements both ports.
        self._storage: IndexStorage = storage if storage is not None else cast(IndexStorage, index)
        # Backends other processes read name each active generation by an alias, moved atomically.
        self._aliases = self._storage if isinstance(self._storage, CollectionAliases) else None
        self._shared = self._maintenance is not None and self._aliases is not None  # other processes write into it
        self._catalog = catalog
        self._embeddings: StoredEmbeddings = cast(StoredEmbeddings, catalog)  # the catalog plays both roles
        self._store = store
        self._embedder = embedder
        self.model = ModelRef(embedder_kind, embedder.model, embedder.dimension)
        self._verify_seconds = verify_seconds
        self._check_seconds = check_seconds
        self._states = {name: CollectionState(name) for name in COLLECTIONS}
        self._lock = asyncio.Lock()  # writes vs. catch-up, switch and repair
        self._wake = asyncio.Event()
        self._model_id = 0
        self._store_id = ""
        self._task: asyncio.Task | None = None
        self._next_verify = 0.0
        self.builds = 0  # completed, for metrics
        self.repairs = 0
        # Writes made while builds ran, and how many of them catch-ups replayed (the rest the
        # builds' streams read from the store themselves).
        self.build_writes = self.replayed = 0

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Open what can be trusted, schedule what must be rebuilt; never raises for the index.
        Without the maintenance lock (another process maintains the index): follow its manifest."""
        self._model_id = await self._catalog.model_id(self.model)
        self._store_id = await self._catalog.store_id()
        self.maintaining = self._maintenance is None or await self._maintenance.try_acquire()
        if not self.maintaining:
            return await self._follow()
        generations = await self._catalog.generations()
        active = {g.collection: g for g in generations if g.state == "active"}
        try:
            existing: set[str] | None = set(await self._storage.collections())
        except VectorIndexError as error:
            log.warning("cannot list the vector collections: %s", error.message)
            existing = None
        rows = await self._store.operations.counts()
        self._next_verify = time.monotonic() + self._verify_seconds
        for name, state in self._states.items():
            state.rows = rows.get(name, 0)
            await self._open(state, active.get(name), existing)
            await self._publish(state)  # before any drop: an alias never names a dropped generation
        for stale in (g for g in generations if g.state != "active"):
            # A build a kill interrupted, or a generation retired just before one: derived, ours.
            await self._drop(stale.physical)
            await self._catalog.forget(stale.id)
        mine = f"-{self._store_id}-"
        for leftover in existing or ():
            if mine in leftover and leftover not in {g.physical for g in active.values()}:
                await self._drop(leftover)

    def run(self) -> asyncio.Task:
        """Start the background task (builds, verification, maintenance)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="index-manager")
        return self._task

    async def close(self) -> None:
        """Stop the background task; a build in progress is abandoned (the next start drops it).
        The maintenance lock stays held: its owner lets it go once the index itself is closed."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        self.maintaining = False

    async def _follow(self) -> None:
        """Serve each collection's active generation as the maintaining process recorded it."""
        active = {g.collection: g for g in await self._catalog.generations() if g.state == "active"}
        holder = await self._maintenance.holder() if self._shared else None
        for name, state in self._states.items():
            generation = active.get(name)
            state.active = generation
            state.usable = generation is not None and generation.model_id == self._model_id
            state.state = CONSISTENT if state.usable else UNAVAILABLE
            # By the backend's alias where it has one: a switch by the maintaining process then
            # reaches this one at once, not at the next look at the manifest.
            state.alias = self.alias_of(name) if self._aliases is not None and state.usable else None
            state.reason = None if state.usable else (
                f"being built by the process maintaining the index (pid {holder or 'unknown'})")

    async def _take_over(self) -> bool:
        """Follow, or take the maintenance over once its holder has gone: True while maintaining.
        A holder asks again too: a lock held by a database session (PostgreSQL) is lost with it,
        and another process may hold it since; this one then follows that one."""
        if self.maintaining:
            if self._maintenance is None or await self._maintenance.try_acquire():
                return True
            log.warning("the maintenance lock was lost; following the process that holds it now")
            self.maintaining = False
            await self._follow()
            return False
        if self._maintenance is not None and await self._maintenance.try_acquire():
            log.info("this process now maintains the vector index")
            for state in self._states.values():
                state.active, state.usable = None, False
            await self.start()
            return True
        await self._follow()
        return False

    async def _open(self, state: CollectionState, generation: Generation | None, existing: set[str] | None) -> None:
        name, dimension = state.name, self.model.dimension
        if generation is None and existing is not None and name in existing:
            # An index from before the manifest: adopt it once if its shape fits, verify it below.
            try:
                await self._index.ensure_collection(name, dimension)
            except VectorIndexError as error:
                await self._drop(name, keep=True)
                return self._want(state, f"the unrecorded collection {name!r} cannot serve: {error.message}")
            generation = await self._catalog.add_generation(name, self._model_id, name, "adopted without a manifest")
            await self._catalog.activate(generation.id)
            generation = next(g for g in await self._catalog.generations() if g.id == generation.id)
            log.warning("adopted the vector collection %r made before the index manifest as %s",
                        name, self.model.describe())
        if generation is None:
            stored = (state.rows or 0) - await self._embeddings.missing_embeddings(name, self._model_id)
            if stored > 0:
                return self._want(state, "no index generation is recorded for the stored records")
            # Nothing to build from (a fresh or freshly imported store): serve an empty generation
            # at once; the outbox fills it and verification embeds whatever it still lacks.
            generation = await self._new_generation(name, "first start")
            try:
                await self._index.ensure_collection(generation.physical, dimension)
            except VectorIndexError as error:
                await self._catalog.forget(generation.id)
                return self._want(state, error.message)
            await self._catalog.activate(generation.id)
            state.active, state.usable, state.points = generation, True, 0
            state.state = CONSISTENT if not state.rows else VERIFYING
            if state.rows:
                self._next_verify = 0.0
            return
        state.active = generation
        if generation.model_id != self._model_id:
            return self._want(state, f"the embedding model changed from {generation.model.describe()} "
                                     f"to {self.model.describe()}")
        if existing is not None and generation.physical not in existing:
            return self._want(state, f"generation {generation.physical} is missing from the vector index")
        try:
            await self._index.ensure_collection(generation.physical, dimension)
            state.points = await self._index.count(generation.physical)
        except VectorIndexError as error:
            await self._drop(generation.physical, keep=True)
            return self._want(state, f"generation {generation.physical} cannot serve and was moved aside: "
                                     f"{error.message}")
        state.usable = True
        pending = await self._embeddings.pending_ids(name)
        state.state = CONSISTENT if state.points == state.rows and not pending else VERIFYING
        if state.state == VERIFYING:
            self._next_verify = 0.0

    def _want(self, state: CollectionState, reason: str) -> None:
        if not state.usable:
            state.state = UNAVAILABLE
        state.wanted = state.reason = reason
        log.warning("vector collection %s: %s; building a new generation in the background", state.name, reason)
        self._wake.set()

    async def _new_generation(self, name: str, reason: str) -> Generation:
        physical = f"{name}-{self._store_id}-{secrets.token_hex(3)}"
        return await self._catalog.add_generation(name, self._model_id, physical, reason)

    async def _drop(self, physical: str, keep: bool = False) -> None:
        try:
            await self._storage.drop_collection(physical, keep=keep)
        except VectorIndexError as error:
            log.warning("could not drop vector collection %s: %s", physical, error.message)

    # ---- background --------------------------------------------------------------------------

    def request_rebuild(self, name: str, reason: str) -> None:
        """Build a new generation of ``name`` (the live one keeps serving until the switch)."""
        state = self._states[name]
        if state.building is None and state.wanted is None:
            state.wanted = reason
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            try:
                if not await self._take_over():
                    await asyncio.sleep(self._check_seconds)
                    continue
                for name in await self._catalog.take_reindex_request():
                    if name in self._states:
                        self.request_rebuild(name, "memory-service reindex")
                for state in self._states.values():
                    if state.wanted is not None:
                        await self._build(state)
                if time.monotonic() >= self._next_verify:
                    self._next_verify = time.monotonic() + self._verify_seconds
                    for state in self._states.values():
                        await self.verify(state.name)
                for state in self._states.values():
                    if state.usable and state.building is None and state.wanted is None and \
                            await self._storage.rebuild_advised(state.active.physical):
                        state.wanted = "index maintenance: enough points await an index build"
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must survive anything; the next round retries
                log.exception("vector index maintenance failed; retrying")
                await asyncio.sleep(RETRY_SECONDS)
            if any(s.wanted for s in self._states.values()):
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self._check_seconds)
            except TimeoutError:
                pass

    async def _build(self, state: CollectionState) -> None:
        reason, state.wanted = state.wanted or "rebuild", None
        if (low := self._storage.disk_low()) is not None:
            state.wanted, state.reason = reason, low
            await asyncio.sleep(RETRY_SECONDS)
            return
        # Where other processes write into this index (a shared backend, named by aliases), their
        # writes during the build are found in the change feed afterwards: where it stands now is
        # where the replay starts. An index private to this process (Qdrant Edge) gets every write
        # through this manager, which the catch-up replays already.
        since = (await self._store.events.bounds())[1] if self._shared else None
        generation = await self._new_generation(state.name, reason)
        state.building = generation
        if not state.usable:
            state.state = REBUILDING
        log.info("building %s for %s: %s", generation.physical, state.name, reason)
        try:
            await self._embed_missing(state)
            state.dirty, state.dirty_filters, state.streamed_to = set(), [], None
            state.progress = Progress(BUILDING, await self._row_count(state.name))
            await self._storage.build_collection(generation.physical, self.model.dimension, self._batches(state))
            state.streamed_to = None  # every write from now on is behind the stream
            await self._catch_up(state, generation.physical)  # without holding writes, while they keep coming
            async with self._lock:  # the last few, with writes held, then the switch
                await self._catch_up(state, generation.physical, rounds=1)
                await self._catalog.activate(generation.id)
                old, state.active = state.active, generation
                state.usable, state.dirty, state.building, state.progress = True, None, None, None
                state.state, state.reason = VERIFYING, None
            await self._publish(state)  # the alias swap: one atomic step on the backend
        except VectorIndexError as error:
            log.warning("building %s failed: %s; retrying", generation.physical, error.message)
            state.dirty, state.building, state.progress, state.wanted = None, None, None, reason
            state.reason = f"a rebuild failed and will be retried: {error.message}"
            await self._drop(generation.physical)
            await self._catalog.forget(generation.id)
            await asyncio.sleep(RETRY_SECONDS)
            return
        self.builds += 1
        if since is not None:
            await self._replay_others(state, generation.physical, since)
        if old is not None and old.physical != generation.physical:
            await self._drop(old.physical)
            await self._catalog.forget(old.id)
        log.info("%s now serves %s (%s)", generation.physical, state.name, self.model.describe())
        await self.verify(state.name)

    async def _row_count(self, name: str) -> int:
        return (await self._store.operations.counts()).get(name, 0)

    # ---- status ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The index status for /health and /metrics (cheap: no I/O beyond one statvfs)."""
        low = self._storage.disk_low()
        states = list(self._states.values())
        return {"status": overall(states, low), "model": self.model.describe(), "diskLow": low,
                "storeId": self._store_id, "maintaining": self.maintaining,
                "builds": self.builds, "repairs": self.repairs,
                "catchUp": {"writesDuringBuilds": self.build_writes, "replayed": self.replayed},
                "collections": {s.name: s.as_dict() for s in states}}

    def problem(self) -> str | None:
        """One line for health when the index is not fully serving, else None."""
        if (low := self._storage.disk_low()) is not None:
            return low
        worst = [s for s in self._states.values() if s.state in DEGRADED_STATES]
        return "; ".join(f"{s.name}: {s.state} ({s.unavailable_message() if s.building else s.reason})"
                         for s in worst) or None

    def degraded(self) -> bool:
        return self._storage.disk_low() is not None or any(s.state in DEGRADED_STATES for s in self._states.values())
