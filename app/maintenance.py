"""The CLI's maintenance commands: reindex, doctor, stats.

They work beside a running service. Whether one runs is known from the store's maintenance lock
(``ports.maintenance``; for a SQLite file an ``flock`` of ``<SQLITE_PATH>.lock``), which a serving
process holds for as long as it runs; the kernel drops it when that process dies, even by
``kill -9``. The store is read directly either way; what only the service holds (its open shards,
its build progress) comes from its ``/health``. When that does not answer at that moment (the
service is overloaded, or listens on another address) the commands say so and report what the
store knows; they never open the shards a live service holds. Without a running service they hold
the lock themselves (a service starting meanwhile serves and takes the maintenance over once it
is free) and open the index here.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import httpx

from app.config import Settings
from app.container import opened
from app.startup import settled_probe
from domain.errors import DomainError
from domain.vectors import COLLECTIONS
from ports.maintenance import MaintenanceLock

log = logging.getLogger("nexusai.index")

STATUS_SECONDS = 5.0  # how long one look at the running service's status may take


@dataclass(frozen=True)
class RunningService:
    """A live process holding this store's maintenance lock; ``pid`` as it wrote it (None if unknown)."""

    pid: int | None

    def describe(self) -> str:
        return f"the running service (pid {self.pid})" if self.pid else "the running service"


async def service_beside(container) -> RunningService | None:
    """The service running on this store, or None: then this process holds the maintenance lock
    (the container's index manager shares the handle) until the container is shut down, after
    the index it may open here is closed."""
    lock: MaintenanceLock = await container.maintenance_lock_resource()
    return None if await lock.try_acquire() else RunningService(await lock.holder())


async def still_running(lock: MaintenanceLock) -> bool:
    """Whether a service holds this store's maintenance lock now (it is free once it stopped;
    then this process holds it until it is shut down)."""
    return not await lock.try_acquire()


async def running_index_status(settings: Settings, store_id: str) -> dict[str, Any] | None:
    """The index status of the service serving this store (its /health), or None when it does
    not answer now."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    headers = {"Authorization": f"Bearer {settings.memory_api_key}"} if settings.memory_api_key else {}
    try:
        async with httpx.AsyncClient(timeout=STATUS_SECONDS, headers=headers) as client:
            body = (await client.get(f"http://{host}:{settings.port}/health")).json()
        status = body["components"]["vectorIndex"]["index"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    return status if isinstance(status, dict) and status.get("storeId") == store_id else None


async def _recorded_report(container, service: RunningService) -> dict[str, Any]:
    """What the store alone knows while the running service's status does not answer: the rows
    and each active generation as recorded. The shards are the service's: never opened here."""
    rows = await (await container.store_resource()).operations.counts()
    active = {g.collection: g for g in await container.catalog().generations() if g.state == "active"}
    state = f"held by {service.describe()}; its status does not answer now"
    report = {name: {"rows": rows.get(name, 0), "generation": g.physical if (g := active.get(name)) else None,
                     "model": g.model.describe() if g else None, "state": state, "held": True} for name in COLLECTIONS}
    return {"status": f"running ({service.describe()}): its index status does not answer now (its /health); "
                      "counts from the store only", "collections": report}


async def _offline_index_report(container) -> dict[str, Any]:
    """Each active generation as recorded, opened read-only-in-effect (counted, never changed)."""
    manager = await container.index_manager_resource()
    index, catalog = await container.vector_index_resource(), container.catalog()
    rows = await (await container.store_resource()).operations.counts()
    active = {g.collection: g for g in await catalog.generations() if g.state == "active"}
    report: dict[str, Any] = {}
    for name in COLLECTIONS:
        g = active.get(name)
        entry: dict[str, Any] = {"rows": rows.get(name, 0), "generation": g.physical if g else None,
                                 "model": g.model.describe() if g else None}
        if g is None:
            entry["state"] = "missing: built at the next start"
        elif g.model != manager.model:
            entry["state"] = f"made by another model: rebuilt at the next start for {manager.model.describe()}"
        else:
            try:
                entry["points"] = await index.count(g.physical)
                entry["state"] = "consistent" if entry["points"] == entry["rows"] else "diverged: repaired at the next start"
            except DomainError as exc:
                entry["state"] = f"unavailable: {exc.message}"
        report[name] = entry
    return {"status": "offline (no running service)", "model": manager.model.describe(), "collections": report}


async def index_report(container, service: RunningService | None) -> dict[str, Any]:
    """The index as the running ``service`` reports it (or the store records it, when it does not
    answer now); without one, opened here (the caller holds the maintenance lock meanwhile)."""
    await container.store_resource()
    if service is None:
        return await _offline_index_report(container)
    online = await running_index_status(container.settings(), await container.catalog().store_id())
    return online if online is not None else await _recorded_report(container, service)


async def run_reindex(settings: Settings, collection: str | None) -> int:
    """Build new generations of the collections from the stored embeddings (embedding only what
    is missing). Online it asks the running service and follows its progress; offline it builds
    here. Resumable: stored embeddings stay stored, so a second run continues where one stopped."""
    names = [collection] if collection else list(COLLECTIONS)
    if any(n not in COLLECTIONS for n in names):
        print(f"unknown collection {collection!r}; use one of {', '.join(COLLECTIONS)}")
        return 2
    async with opened(settings) as container:
        await container.store_resource()
        service = await service_beside(container)
        return await _reindex(container, settings, names, service)


async def _reindex(container, settings: Settings, names: list[str], service: RunningService | None) -> int:
    from rich.console import Console
    from rich.progress import Progress

    catalog = container.catalog()
    store_id = await catalog.store_id()
    before = {g.collection: g.physical for g in await catalog.generations() if g.state == "active"}
    manager = None
    if service is not None:
        await catalog.request_reindex(names)
        print(f"asked {service.describe()} to rebuild: " + ", ".join(names))
    else:
        manager = await container.index_manager_resource()
        await manager.start()
        for name in names:
            manager.request_rebuild(name, "memory-service reindex")
        manager.run()
    with Progress(console=Console(stderr=True)) as bar:  # stdout keeps the result line
        tasks = {n: bar.add_task(n, total=None) for n in names}
        while True:
            status = await running_index_status(settings, store_id) if manager is None else manager.status()
            if status is None:  # the service does not answer now: the manifest says when it switched
                if not await still_running(container.maintenance_lock()):
                    print("the running service stopped; run reindex again to finish here")
                    return 1
                recorded = {g.collection: g.physical for g in await catalog.generations() if g.state == "active"}
                status = {"collections": {n: {"generation": recorded.get(n), "state": "consistent",
                                              "unknown": True} for n in names}}
            collections, done = status.get("collections", {}), []
            for name in names:
                state = collections.get(name, {})
                progress = state.get("progress") or {}
                phase = progress.get("text") or progress.get("phase") or state.get("state", "?")
                if state.get("unknown"):
                    phase = "waiting: the service's status does not answer now"
                bar.update(tasks[name], total=progress.get("total") or None, completed=progress.get("done", 0),
                           description=f"{name}: {phase}")
                switched = state.get("generation") not in (None, before.get(name))
                if switched and state.get("state") == "consistent" and not state.get("building"):
                    bar.update(tasks[name], total=1, completed=1, description=f"{name}: done")
                    done.append(name)
            if len(done) == len(names):
                break
            await asyncio.sleep(0.5)
    counts = {n: collections[n].get("points", "switched (points not reported)") for n in names}
    print("reindexed: " + ", ".join(f"{n}={c}" for n, c in counts.items()))
    return 0


async def run_doctor(settings: Settings) -> int:
    print(f"store: {settings.store} {settings.sqlite_path}")
    print(f"vector index: {settings.vector_index} {settings.qdrant_url or settings.resolved_qdrant_path or '(memory)'}")
    print(f"embedder: {settings.embedder} model={settings.model_name} dim={settings.embedding_dim or 'model default'}")
    async with opened(settings) as container:
        service = await service_beside(container)
        problems = await _doctor(container, service)
    if problems is None:
        return 1
    for problem in problems:
        print(f"PROBLEM {problem}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


async def _doctor(container, service: RunningService | None) -> list[str] | None:
    problems: list[str] = []
    try:
        from app.main import check_configuration

        check_configuration(container)
    except Exception as exc:
        print(f"PROBLEM configuration: {exc}")
        return None
    store = await container.store_resource()
    if (error := await store.operations.health()) is not None:
        problems.append(f"store: {error}")
    else:
        report = await index_report(container, service)
        print(f"vector index: {report['status']}")
        for name, entry in report["collections"].items():
            print(f"  {name}: {entry.get('state')} (points {entry.get('points')}, rows {entry.get('rows')})")
            if str(entry.get("state", "")).startswith("unavailable"):
                problems.append(f"vector index: {name}: {entry['state']}")
        backlog = await store.outbox.backlog()
        print(f"embedding backlog: {backlog.pending} pending, {backlog.failing} failing")
    probe = await settled_probe(await container.embedder_resource())  # waits for an in-process model to load
    if not probe.reachable:
        problems.append(f"embedder: {probe.error}")
    return problems


async def collect_stats(settings: Settings) -> dict[str, Any]:
    async with opened(settings) as container:
        store = await container.store_resource()
        service = await service_beside(container)
        counts = await store.operations.counts()
        backlog = await store.outbox.backlog()
        report = await index_report(container, service)
        vectors = {name: entry.get("points", entry["state"] if entry.get("held") else f"unavailable: {entry.get('state')}")
                   for name, entry in report["collections"].items()}
        return {"rows": counts, "bytes": await store.operations.sizes(), "vectors": vectors, "index": report,
                "backlog": {"pending": backlog.pending, "failing": backlog.failing,
                            "oldest": backlog.oldest_created_at, "lastError": backlog.last_error}}
