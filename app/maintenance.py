"""The CLI's maintenance commands: reindex, doctor, stats."""

from __future__ import annotations

from typing import Any

from app.config import Settings
from app.container import build_container
from app.main import close_container
from app.startup import settled_probe
from domain.errors import DomainError
from domain.vectors import COLLECTIONS


async def run_reindex(settings: Settings, collection: str | None) -> int:
    from rich.console import Console
    from rich.progress import Progress

    names = [collection] if collection else list(COLLECTIONS)
    if any(n not in COLLECTIONS for n in names):
        print(f"unknown collection {collection!r}; use one of {', '.join(COLLECTIONS)}")
        return 2
    container = build_container(settings)
    try:
        indexing = container.indexing()
        await indexing.ensure_collections()
        store = container.store()
        queued = sum([await store.enqueue_reindex(n) for n in names])
        with Progress(console=Console(stderr=True)) as progress:  # stdout keeps the result line
            task = progress.add_task("re-embedding", total=queued)
            while True:
                result = await indexing.run_once(settings.worker_batch)
                progress.advance(task, result.done)
                if result.deferred:
                    print(f"embedding failed, {result.deferred} jobs left queued: {indexing.last_error}")
                    return 1
                if not result.done:
                    break
        counts = {n: await container.vector_index().count(n) for n in names}
        print("reindexed: " + ", ".join(f"{n}={c}" for n, c in counts.items()))
        return 0
    finally:
        await close_container(container)


async def run_doctor(settings: Settings) -> int:
    problems: list[str] = []
    print(f"store: {settings.store} {settings.sqlite_path}")
    print(f"vector index: {settings.vector_index} {settings.qdrant_url or settings.resolved_qdrant_path or '(memory)'}")
    print(f"embedder: {settings.embedder} model={settings.model_name} dim={settings.embedding_dim or 'model default'}")
    try:
        container = build_container(settings)
        from app.main import check_configuration

        check_configuration(container)
    except Exception as exc:
        print(f"PROBLEM configuration: {exc}")
        return 1
    try:
        if (error := await container.store().health()) is not None:
            problems.append(f"store: {error}")
        try:
            await container.indexing().ensure_collections()
        except DomainError as exc:
            problems.append(f"vector index: {exc.message}")
        if (error := await container.vector_index().health()) is not None:
            problems.append(f"vector index: {error}")
        probe = await settled_probe(container.embedder())  # waits for an in-process model to load
        if not probe.reachable:
            problems.append(f"embedder: {probe.error}")
        backlog = await container.store().backlog()
        print(f"embedding backlog: {backlog.pending} pending, {backlog.failing} failing")
    finally:
        await close_container(container)
    for problem in problems:
        print(f"PROBLEM {problem}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


async def collect_stats(settings: Settings) -> dict[str, Any]:
    container = build_container(settings)
    try:
        store = container.store()
        counts = await store.counts()
        backlog = await store.backlog()
        index = container.vector_index()
        vectors = {}
        try:
            # Opens the existing shards (an embedded index knows a collection only once opened).
            await container.indexing().ensure_collections()
        except DomainError:
            pass  # each count below then reports the index as unavailable
        for name in COLLECTIONS:
            try:
                vectors[name] = await index.count(name)
            except DomainError as exc:
                vectors[name] = f"unavailable: {exc.message}"
        return {"rows": counts, "bytes": await store.sizes(), "vectors": vectors,
                "backlog": {"pending": backlog.pending, "failing": backlog.failing,
                            "oldest": backlog.oldest_created_at, "lastError": backlog.last_error}}
    finally:
        await close_container(container)
