"""``memory-service dead-letters list|retry``: the embedding jobs given up on, and their revival."""

from __future__ import annotations

import json

from app.config import Settings
from app.container import opened


async def list_dead_letters(settings: Settings, limit: int) -> list[dict]:
    """The dead-lettered outbox jobs, oldest first, as JSON-ready dicts."""
    async with opened(settings) as container:
        jobs = await (await container.store_resource()).outbox.dead(limit)
    return [{"id": j.id, "collection": j.collection, "op": j.op, "refId": j.ref_id, "attempts": j.attempts,
             "createdAt": j.created_at, "deadAt": j.dead_at, "lastError": j.last_error} for j in jobs]


async def retry_dead_letters(settings: Settings, job_ids: list[int] | None) -> int:
    """Make the named dead jobs (all when ``None``) due again; a running server picks them up."""
    async with opened(settings) as container:
        return await (await container.store_resource()).outbox.retry_dead(job_ids)


def render(jobs: list[dict]) -> str:
    return "\n".join(json.dumps(job, ensure_ascii=False) for job in jobs)
