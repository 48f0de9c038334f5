"""The vector index's owner and its followers, over one store.

Exactly one process owns the index: it holds the ``flock`` of ``<SQLITE_PATH>.owner`` (see
``adapters.ipc.election``), opens the index (an embedded engine allows one opener), runs the index
manager and the embedding worker, and answers the others on ``<SQLITE_PATH>.sock``. The others
follow: their searches, counts and status reach the owner through ``SocketVectorIndex``.

``memory-service serve`` runs the owner in a process of its own that serves no HTTP (the index
host, ``app.index_host``), at every ``WORKERS`` value: every HTTP-serving process is a follower
that never takes the role (``may_own=False``). When the host dies the kernel releases the lock;
the serving process starts a new host, which takes the lock and the socket over. Meanwhile vector
calls raise ``VectorIndexError`` and searches answer from the keyword leg, as when the index is
down in a single process; ``/health`` says so. Nothing acknowledged is lost: writes land in SQLite
with their outbox jobs, which the new owner's worker drains. An owner (``may_own=True``) whose
lock is taken (a maintenance command working offline) tries again every ``ELECTION_SECONDS``.

``IndexView`` is what the services, health and metrics of every process see instead of the index
manager: the local manager while this process owns the index, the owner's answers otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from adapters.ipc.client import SocketVectorIndex
from adapters.ipc.election import OwnerLock
from adapters.ipc.embedder import owner_operations
from adapters.ipc.server import IndexServer
from app.worker import EmbeddingWorker
from domain.errors import VectorIndexError
from domain.index_manager import IndexManager
from domain.index_status import UNAVAILABLE, CollectionState
from domain.vectors import COLLECTIONS, ModelRef, VectorFilter, VectorHit, VectorPoint

log = logging.getLogger("nexusai.index")

ELECTION_SECONDS = 1.0  # how often a follower tries the owner lock besides on a lost connection
FOLLOW_SECONDS = 30.0  # how long a starting follower waits for the owner to answer


def role_paths(sqlite_path: str) -> tuple[str, str]:
    """The owner lock and the index socket of the store at ``sqlite_path`` (both beside it)."""
    return f"{sqlite_path}.owner", f"{sqlite_path}.sock"


class IndexRole:
    """Elects, promotes and stops; owns the ``IndexView`` handed to the services."""

    def __init__(
        self, *, lock_path: str, socket_path: str, model: ModelRef,
        open_manager: Callable[[], IndexManager], close_owned: Callable[[], Awaitable[None]],
        follow_seconds: float = FOLLOW_SECONDS, may_own: bool = True,
        dead_lettered: Callable[[], int] = lambda: 0, embedder: Any = None, query_timeout: float | None = None,
    ) -> None:
        self._lock = OwnerLock(lock_path)
        self._follow_seconds = follow_seconds
        self.may_own = may_own  # False: a follower only (an HTTP process beside an index host)
        self._dead_lettered = dead_lettered
        self._embedder = embedder  # an owner embeds the followers' queries with it (``SocketEmbedder``)
        self.socket_path = socket_path
        self._open_manager = open_manager
        self._close_owned = close_owned
        # The embedding worker runs in the owner only (``use_worker`` before ``start``).
        self._worker: EmbeddingWorker | None = None
        self._worker_enabled = False
        self._wake = asyncio.Event()
        # A request's calls (search, stored vectors, counts, query embeddings) wait ``query_timeout``.
        self.remote = SocketVectorIndex(socket_path, query_timeout=query_timeout, on_lost=self._wake.set)
        self.manager: IndexManager | None = None
        self._server: IndexServer | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._handlers: dict[int, Any] = {}
        self.view = IndexView(self, model)

    def use_worker(self, worker: EmbeddingWorker, enabled: bool) -> None:
        self._worker, self._worker_enabled = worker, enabled

    def _notify_worker(self) -> None:
        if self._worker is not None:
            self._worker.notify()

    @property
    def owner(self) -> bool:
        return self.manager is not None

    async def start(self) -> None:
        """Try for the role once (so one of the first workers owns the index before serving), then
        keep watching for the owner's death in the background. A follower only (``may_own``
        False) waits for the owner to answer and never tries the lock."""
        self._retire_on_signals()
        await self._elect()
        # A follower serves once the owner answers (or after FOLLOW_SECONDS): its first searches
        # and its start-up report then see the index, not an owner that is still opening it.
        deadline = time.monotonic() + self._follow_seconds
        while not self.owner and not self._stopping:
            await self.view.health()  # fetches the owner's report when it answers
            if self.view.reported is not None or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
            await self._elect()
        if self.may_own:
            self._task = asyncio.create_task(self._watch(), name="index-owner-election")

    async def own(self) -> None:
        """An index host's start: take the role now if the lock is free, else keep trying in the
        background (a maintenance command may hold it for a while)."""
        self._retire_on_signals()
        try:
            await self._elect()
        except Exception:
            log.exception("opening the vector index failed; retrying")
        self._task = asyncio.create_task(self._watch(), name="index-owner-election")

    def _retire_on_signals(self) -> None:
        """A worker told to stop (SIGTERM/SIGINT: the service is shutting down, or this worker is
        being replaced) no longer takes the index over while it drains; the handler in place
        (uvicorn's) still runs. Only the main thread may set handlers; ``stop`` puts them back."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)

            def retire(signum: int, frame: Any, previous: Any = previous) -> None:
                self._stopping = True
                if callable(previous):
                    previous(signum, frame)
                elif previous == signal.SIG_DFL:  # what the signal would have done without us
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)

            self._handlers[sig] = previous
            signal.signal(sig, retire)

    def _restore_signals(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig, previous in self._handlers.items():
                signal.signal(sig, previous)
        self._handlers.clear()

    async def _watch(self) -> None:
        while not self._stopping and not self.owner:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), ELECTION_SECONDS)
            self._wake.clear()
            try:
                await self._elect()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the watch die: the next round tries again
                log.exception("taking over the vector index failed; retrying")

    async def _elect(self) -> None:
        if self._stopping or not self.may_own or not self._lock.try_acquire():
            return
        try:
            manager = self._open_manager()
            await manager.start()  # never waits for a build; derived data does not hold anything up
            manager.run()
            extras = {"report": self._report, **owner_operations(self._embedder)}  # followers' queries too
            server = IndexServer(manager, self.socket_path, extras=extras, on_notify=self._notify_worker)
            await server.start()
        except BaseException:
            self._lock.release()
            with contextlib.suppress(Exception):
                await self._close_owned()
            raise
        self.manager, self._server = manager, server
        if self._worker is not None and self._worker_enabled:
            self._worker.start()
        log.info("process %d owns the vector index (serving the other processes on %s)",
                 os.getpid(), self.socket_path)

    async def _report(self) -> dict[str, Any]:
        manager = self.manager
        if manager is None:
            raise VectorIndexError("this process no longer owns the vector index")
        error = await manager.health()
        if error is None:
            await manager.refresh()
        return {"health": error, "status": manager.status(), "problem": manager.problem(), "owner": os.getpid(),
                "deadLettered": self._dead_lettered()}

    def holder(self) -> int | None:
        return self._lock.holder()

    def notify(self) -> None:
        """A write landed in the outbox: wake the embedding worker, here or in the owner."""
        if self.owner:
            self._notify_worker()
        else:
            self.remote.notify()

    async def stop(self) -> None:
        """Stop watching; an owner stops its worker and socket, closes the index and lets go of
        the lock (a worker still serving takes over)."""
        self._stopping = True
        self._restore_signals()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.remote.close()
        if self.manager is None:
            return
        try:
            if self._worker is not None:
                await self._worker.stop()
            if self._server is not None:
                await self._server.close()
            await self._close_owned()
        finally:
            self.manager = self._server = None
            self._lock.release()


class IndexView:
    """The index manager's face in every worker: local while owning, the owner's otherwise."""

    def __init__(self, role: IndexRole, model: ModelRef) -> None:
        self._role = role
        self.model = model
        self._report: dict[str, Any] | None = None

    @property
    def reported(self) -> dict[str, Any] | None:
        """The owner's last report (a follower's), None before the owner first answered."""
        return self._report

    def _target(self) -> Any:
        return self._role.manager or self._role.remote

    # ---- the VectorIndex port on logical names (what search and indexing call) -------------------

    async def ensure_collection(self, name: str, dimension: int) -> None:
        await self._target().ensure_collection(name, dimension)

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        await self._target().upsert(collection, points)

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        await self._target().delete(collection, ids)

    async def delete_by_filter(self, collection: str, filter: VectorFilter) -> None:
        await self._target().delete_by_filter(collection, filter)

    async def search(self, collection: str, vector: Sequence[float], limit: int,
                     filter: VectorFilter | None = None, score_threshold: float | None = None) -> list[VectorHit]:
        return await self._target().search(collection, vector, limit, filter, score_threshold)

    async def count(self, collection: str) -> int:
        return await self._target().count(collection)

    async def retrieve_vectors(self, collection: str, ids: Sequence[int]) -> dict[int, list[float]]:
        return await self._target().retrieve_vectors(collection, ids)

    # ---- status, for /health, /metrics and the start-up report ---------------------------------

    async def health(self) -> str | None:
        """None when the index answers. A follower fetches the owner's whole report here (the
        health check then reads ``status`` and ``problem`` from it without another round trip)."""
        if (manager := self._role.manager) is not None:
            return await manager.health()
        try:
            self._report = await self._role.remote.report()
        except VectorIndexError as exc:
            self._report = None
            return f"{self._no_owner()}: {exc.message}; searches answer from keywords meanwhile"
        return self._report["health"]

    async def refresh(self) -> None:
        if (manager := self._role.manager) is not None:
            await manager.refresh()

    def status(self) -> dict[str, Any]:
        if (manager := self._role.manager) is not None:
            return {**manager.status(), "owner": {"pid": os.getpid(), "thisWorker": True}}
        if self._report is not None:
            return {**self._report["status"], "owner": {"pid": self._report["owner"], "thisWorker": False}}
        states = [CollectionState(name, state=UNAVAILABLE, reason=self._no_owner()) for name in COLLECTIONS]
        return {"status": UNAVAILABLE, "model": self.model.describe(), "diskLow": None, "storeId": None,
                "builds": 0, "repairs": 0, "collections": {s.name: s.as_dict() for s in states},
                "owner": {"pid": None, "thisWorker": False}}

    def problem(self) -> str | None:
        if (manager := self._role.manager) is not None:
            return manager.problem()
        if self._report is not None:
            return self._report["problem"]
        return self._no_owner()

    def _no_owner(self) -> str:
        holder = self._role.holder()
        if not self._role.may_own:
            who = f"the index host (pid {holder})" if holder else "the index host"
            return f"the vector index is served by {who}, which is starting or gone (it is restarted)"
        who = f"worker process {holder}" if holder else "another worker process"
        return f"the vector index is served by {who}, which is starting or gone (another takes over)"

    def dead_lettered(self, local: int) -> int:
        """Jobs the owner's embedding worker gave up on since it started (``local`` when this
        process owns the index, or before the owner first answered)."""
        if self._role.manager is None and self._report is not None:
            return int(self._report.get("deadLettered", 0))
        return local

    def degraded(self) -> bool:
        if (manager := self._role.manager) is not None:
            return manager.degraded()
        return self.problem() is not None

    async def close(self) -> None:
        """The role closes what it opened (``IndexRole.stop``)."""

    def disk_low(self) -> str | None:
        manager = self._role.manager
        return self._role.remote.disk_low() if manager is None else manager.status()["diskLow"]


class WorkerCollector:
    """``memory_worker{pid, role}`` = 1: which worker process answered this scrape (with
    ``WORKERS`` > 1 request counters and latencies are that worker's own)."""

    def __init__(self, role: IndexRole) -> None:
        self._role = role

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily("memory_worker", "The worker process that answered this scrape and its part in "
                                   "the vector index (owner or follower)", labels=["pid", "role"])
        family.add_metric([str(os.getpid()), "owner" if self._role.owner else "follower"], 1)
        yield family


def attach_index_role(container: Any, settings: Any, *, may_own: bool = True) -> IndexRole:
    """Make ``container.index_manager`` this process's ``IndexView``; the role opens the real
    manager (and with it the index) only if this process may own it and wins the election."""
    from dependency_injector import providers

    from app.container import _index_manager, embed_through_owner

    owned = providers.Singleton(_index_manager, container.vector_index, container.catalog, container.store,
                                container.embedder, container.settings)

    opened: list[IndexManager] = []

    def open_manager() -> IndexManager:
        opened.append(owned())
        return opened[-1]

    async def close_owned() -> None:
        if not opened:
            return
        opened.clear()
        try:
            await owned().close()
            await container.vector_index().close()
        finally:  # a later election opens afresh
            owned.reset()
            for provider in (container.vector_index.last_overriding, *container.vector_index.providers.values()):
                if provider is not None and hasattr(provider, "reset"):
                    provider.reset()

    embedder = container.embedder()
    lock_path, socket_path = role_paths(settings.sqlite_path)
    role = IndexRole(lock_path=lock_path, socket_path=socket_path,
                     model=ModelRef(settings.embedder, embedder.model, embedder.dimension),
                     open_manager=open_manager, close_owned=close_owned, may_own=may_own,
                     dead_lettered=lambda: container.indexing().dead_lettered,
                     embedder=embedder if may_own else None, query_timeout=settings.vector_query_timeout)
    container.index_manager.override(providers.Object(role.view))
    if not may_own:  # a follower only: the owner's model embeds its queries (no copy loaded here)
        embed_through_owner(container, role.remote)
    # The container's worker lifecycle becomes the role's: it runs the election (and, in the
    # owner, the embedding worker) and stops it all at shutdown, after the health monitor that
    # names it. The index manager and the index are the role's to open and close.
    role.use_worker(container.worker(), settings.worker_enabled)
    container.worker_running.override(providers.Resource(_role_running, role))
    return role


async def _role_running(role: IndexRole) -> AsyncIterator[IndexRole]:
    await role.start()
    try:
        yield role
    finally:
        try:
            await role.stop()
        except Exception:
            log.exception("stopping the vector index role failed")
