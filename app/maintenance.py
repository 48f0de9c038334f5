"""The CLI's maintenance commands: reindex, doctor, stats.

They work beside a running service: the store (SQLite, WAL) is read directly, and what only the
service holds (its open Edge shards, its build progress) comes from the service's own /health
when one answers on the configured address for the same store. Without a running service they
open the index themselves.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.config import Settings
from app.container import opened
from app.startup import settled_probe
from domain.errors import DomainError
from domain.vectors import COLLECTIONS


async def running_index_status(settings: Settings, store_id: str) -> dict[str, Any] | None:
    """The index status of a service serving this store, or None when none answers."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    headers = {"Authorization": f"Bearer {settings.memory_api_key}"} if settings.memory_api_key else {}
    try:
        async with httpx.AsyncClient(timeout=2.0, headers=headers) as client:
            body = (await client.get(f"http://{host}:{settings.port}/health")).json()
        status = body["components"]["vectorIndex"]["index"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    return status if status.get("storeId") == store_id else None


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


async def index_report(container) -> dict[str, Any]:
    await container.store_resource()
    store_id = await container.catalog().store_id()
    online = await running_index_status(container.settings(), store_id)
    return online if online is not None else await _offline_index_report(container)


async def run_reindex(settings: Settings, collection: str | None) -> int:
    """Build new generations of the collections from the stored embeddings (embedding only what
    is missing). Online it asks the running service and follows its progress; offline it builds
    here. Resumable: stored embeddings stay stored, so a second run continues where one stopped."""
    from rich.console import Console
    from rich.progress import Progress

    names = [collection] if collection else list(COLLECTIONS)
    if any(n not in COLLECTIONS for n in names):
        print(f"unknown collection {collection!r}; use one of {', '.join(COLLECTIONS)}")
        return 2
    async with opened(settings) as container:
        await container.store_resource()
        catalog = container.catalog()
        store_id = await catalog.store_id()
        online = await running_index_status(settings, store_id) is not None
        before = {g.collection: g.physical for g in await catalog.generations() if g.state == "active"}
        manager = None
        if online:
            await catalog.request_reindex(names)
            print("asked the running service to rebuild: " + ", ".join(names))
        else:
            manager = await container.index_manager_resource()
            await manager.start()
            for name in names:
                manager.request_rebuild(name, "memory-service reindex")
            manager.run()
        with Progress(console=Console(stderr=True)) as bar:  # stdout keeps the result line
            tasks = {n: bar.add_task(n, total=None) for n in names}
            while True:
                status = (await running_index_status(settings, store_id) if online else manager.status()) or {}
                collections = status.get("collections", {})
                done = []
                for name in names:
                    state = collections.get(name, {})
                    progress = state.get("progress") or {}
                    bar.update(tasks[name], total=progress.get("total") or None, completed=progress.get("done", 0),
                               description=f"{name}: {progress.get('phase') or state.get('state', '?')}")
                    switched = state.get("generation") not in (None, before.get(name))
                    if switched and state.get("state") == "consistent" and not state.get("building"):
                        bar.update(tasks[name], total=1, completed=1, description=f"{name}: done")
                        done.append(name)
                if len(done) == len(names):
                    break
                if online and not status:
                    print("the running service stopped answering; run reindex again to follow it")
                    return 1
                await asyncio.sleep(0.5)
        counts = {n: collections[n].get("points") for n in names}
        print("reindexed: " + ", ".join(f"{n}={c}" for n, c in counts.items()))
        return 0


async def run_doctor(settings: Settings) -> int:
    problems: list[str] = []
    print(f"store: {settings.store} {settings.sqlite_path}")
    print(f"vector index: {settings.vector_index} {settings.qdrant_url or settings.resolved_qdrant_path or '(memory)'}")
    print(f"embedder: {settings.embedder} model={settings.model_name} dim={settings.embedding_dim or 'model default'}")
    async with opened(settings) as container:
        try:
            from app.main import check_configuration

            check_configuration(container)
        except Exception as exc:
            print(f"PROBLEM configuration: {exc}")
            return 1
        store = await container.store_resource()
        if (error := await store.operations.health()) is not None:
            problems.append(f"store: {error}")
        else:
            report = await index_report(container)
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
    for problem in problems:
        print(f"PROBLEM {problem}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


async def collect_stats(settings: Settings) -> dict[str, Any]:
    async with opened(settings) as container:
        store = await container.store_resource()
        counts = await store.operations.counts()
        backlog = await store.outbox.backlog()
        report = await index_report(container)
        vectors = {name: entry.get("points", f"unavailable: {entry.get('state')}")
                   for name, entry in report["collections"].items()}
        return {"rows": counts, "bytes": await store.operations.sizes(), "vectors": vectors, "index": report,
                "backlog": {"pending": backlog.pending, "failing": backlog.failing,
                            "oldest": backlog.oldest_created_at, "lastError": backlog.last_error}}
