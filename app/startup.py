"""What start-up found, in one log line per component, and a warning when the service is degraded.

The store and vector index lines are written before the first request is served; the embedder
line follows from a background task, because an in-process model may take seconds to load and a
remote embedder may take its whole timeout to answer, and neither may delay serving.
"""

from __future__ import annotations

import asyncio
import logging

from adapters.sqlite.driver import sqlite3
from app import heap
from ports.embedder import EmbedderStatus

log = logging.getLogger("nexusai.startup")

POLL_SECONDS = 0.1  # how often a loading model is asked whether it is ready


async def report_store_and_index(container) -> None:
    """Log the store and vector index lines (never raises: a report must not stop start-up)."""
    settings = container.settings()
    store = container.store()
    where = f"{settings.sqlite_path} (SQLite {sqlite3.sqlite_version})" if settings.store == "sqlite" else "(in memory)"
    error = await store.operations.health()
    rows: dict[str, int] = {}
    if error is None:
        rows = await store.operations.counts()
        backlog = await store.outbox.backlog()
        log.info("store: %s %s ok: %d sessions, %d episodes, %d entities, %d summaries; embedding backlog %d",
                 settings.store, where, rows.get("sessions", 0), rows.get("episodes", 0),
                 rows.get("entities", 0), rows.get("summaries", 0), backlog.pending)
    else:
        log.error("store: %s %s is down: %s", settings.store, where, error)
    index_where = settings.qdrant_url or settings.resolved_qdrant_path or "(in memory)"
    status = container.index_manager().status()
    collections = ", ".join(
        f"{name} {c['state']} ({c['points'] if c['points'] is not None else '?'} points, generation {c['generation']})"
        for name, c in status["collections"].items())
    if status["status"] in ("consistent", "verifying"):  # verifying: compared with the store in the background
        log.info("vector index: %s %s %s, model %s: %s", settings.vector_index, index_where, status["status"],
                 status["model"], collections)
    else:
        # Derived data never stops start-up: the manager verifies, repairs or rebuilds in the background.
        log.warning("vector index: %s %s %s, model %s: %s; search answers from the keyword leg where a "
                    "collection cannot serve yet", settings.vector_index, index_where, status["status"],
                    status["model"], collections)


async def settled_probe(embedder) -> EmbedderStatus:
    """The embedder's probe once it is no longer starting (a loading model has loaded or failed)."""
    status = await embedder.probe()
    while status.starting:
        await asyncio.sleep(POLL_SECONDS)
        status = await embedder.probe()
    return status


async def freeze_heap_once_loaded(embedder) -> None:
    """``app.heap.freeze_start_up`` again once the embedder is no longer starting: an in-process model
    loads after start-up, and what it built would otherwise stay in the collected generations."""
    await settled_probe(embedder)
    heap.freeze_start_up()


async def report_embedder(container) -> None:
    """Wait (off the request path) until the embedder is ready or known down, and log it."""
    settings = container.settings()
    embedder = container.embedder()
    where = {"embedding-service": settings.embedding_service_url, "ollama": settings.ollama_url,
             "openai": settings.openai_url}.get(settings.embedder, getattr(embedder, "where", "in process"))
    status = await embedder.probe()
    if status.starting:
        log.info("embedder: %s (%s) model %s, %d-d: loading (%s)", settings.embedder, where, status.model,
                 status.dimension, getattr(embedder, "while_loading", "searches and embeddings wait for it"))
        status = await settled_probe(embedder)
    if status.reachable:
        log.info("embedder: %s (%s) reachable: model %s, %d-d", settings.embedder, where, status.model,
                 status.dimension)
    else:
        log.warning("embedder: %s (%s) model %s is unreachable: %s. Search is keyword-only (degraded) and new "
                    "memories wait in the embedding backlog until it answers", settings.embedder, where,
                    status.model, status.error)
