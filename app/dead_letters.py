"""``memory-service dead-letters list|retry``: the embedding jobs given up on, and their revival."""

from __future__ import annotations

import json

from app.config import Settings
from app.container import build_container


async def list_dead_letters(settings: Settings, limit: int) -> list[dict]:
    """The dead-lettered outbox jobs, oldest first, as JSON-ready dicts."""
    container = build_container(settings)
    try:
        jobs = await container.store().outbox.dead(limit)
    finally:
        await container.store().close()
    return [{"id": j.id, "collection": j.collection, "op": j.op, "refId": j.ref_id, "attempts": j.attempts,
             "createdAt": j.created_at, "deadAt": j.dead_at, "lastError": j.last_error} for j in jobs]


async def retry_dead_letters(settings: Settings, job_ids: list[int] | None) -> int:
    """Make the named dead jobs (all when ``None``) due again; a running server picks them up."""
    container = build_container(settings)
    try:
        return await container.store().outbox.retry_dead(job_ids)
    finally:
        await container.store().close()


def render(jobs: list[dict]) -> str:
    return "\n".join(json.dumps(job, ensure_ascii=False) for job in jobs)
