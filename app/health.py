"""``GET /health``: liveness plus the state of every component the service depends on."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from litestar import get
from litestar.datastructures import State

from domain.models import parse_timestamp

PROBE_TTL = 5.0  # seconds: health is polled often, and each embedder probe is a real embedding


async def component_status(container, cache: dict) -> dict[str, Any]:
    store_error = await container.store().health()
    index_error = await container.vector_index().health()
    embedder = container.embedder()
    now = time.monotonic()
    if cache.get("at", -1e9) + PROBE_TTL < now:
        cache["probe"], cache["at"] = await embedder.probe(), now
    probe = cache["probe"]
    backlog = await container.store().backlog() if store_error is None else None
    age = None
    if backlog and backlog.oldest_created_at:
        age = round((datetime.now(UTC) - parse_timestamp(backlog.oldest_created_at)).total_seconds(), 3)
    return {
        "store": {"status": "ok" if store_error is None else "down", "error": store_error},
        "vectorIndex": {"status": "ok" if index_error is None else "down", "error": index_error,
                        "kind": container.settings().vector_index},
        "embedder": {"status": "ok" if probe.reachable else "down", "reachable": probe.reachable,
                     "model": probe.model, "dimension": probe.dimension, "error": probe.error,
                     "kind": container.settings().embedder},
        "embeddingBacklog": {
            "pending": backlog.pending if backlog else None,
            "failing": backlog.failing if backlog else None,
            "oldestAgeSeconds": age,
            "lastError": backlog.last_error if backlog else None,
        },
    }


@get("/health", summary="Liveness and component status", tags=["operations"])
async def health(state: State) -> dict[str, Any]:
    components = await component_status(state.container, state.health_cache)
    if components["store"]["status"] != "ok":
        status = "down"
    elif any(components[c]["status"] != "ok" for c in ("vectorIndex", "embedder")):
        status = "degraded"
    else:
        status = "ok"
    return {"status": status, "components": components}
