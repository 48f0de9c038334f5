"""The outbox's dead-letter contract, over every store adapter (issue 11)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.models import NewEpisode
from ports.memory_store import MemoryStore

LATER = datetime.now(UTC) + timedelta(days=1)


async def _jobs(store: MemoryStore, count: int):
    session = await store.create_session("dead-letters", {})
    await store.add_episodes([NewEpisode(session.id, f"u{i}", "a") for i in range(count)])
    return await store.due_jobs(100, LATER)


async def test_a_buried_job_is_never_due_and_is_counted_apart_from_the_pending(store: MemoryStore) -> None:
    first, second, third = await _jobs(store, 3)
    await store.bury_jobs([second.id], "HTTP 400: input too long")
    assert [j.id for j in await store.due_jobs(100, LATER)] == [first.id, third.id]
    backlog = await store.backlog()
    assert (backlog.pending, backlog.dead, backlog.failing) == (2, 1, 0)
    [dead] = await store.dead_jobs(10)
    assert (dead.id, dead.attempts, dead.last_error) == (second.id, 1, "HTTP 400: input too long")
    assert dead.dead_at is not None


async def test_retrying_dead_jobs_makes_them_due_now_with_no_attempts(store: MemoryStore) -> None:
    jobs = await _jobs(store, 3)
    await store.bury_jobs([j.id for j in jobs], "refused")
    assert await store.retry_dead_jobs([jobs[0].id, 999_999]) == 1
    assert [j.id for j in await store.due_jobs(100, LATER)] == [jobs[0].id]
    assert (await store.due_jobs(100, LATER))[0].attempts == 0
    assert await store.retry_dead_jobs([]) == 0
    assert await store.retry_dead_jobs() == 2
    assert await store.dead_jobs(10) == []
    assert (await store.backlog()).dead == 0


async def test_the_store_health_check_writes(store: MemoryStore) -> None:
    assert await store.health() is None
    assert await store.health() is None  # the probe row is rewritten, never duplicated
