"""The outbox's dead-letter contract, over every store adapter (issue 11)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain import writes
from domain.models import NewEpisode
from ports.store import Store

LATER = datetime.now(UTC) + timedelta(days=1)


async def _jobs(store: Store, count: int):
    session = await store.uow.run(lambda tx: writes.create_session(tx, "dead-letters", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a") for i in range(count)]))
    return await store.outbox.due(100, LATER)


async def test_a_buried_job_is_never_due_and_is_counted_apart_from_the_pending(store: Store) -> None:
    first, second, third = await _jobs(store, 3)
    await store.outbox.bury([second.id], "HTTP 400: input too long")
    assert [j.id for j in await store.outbox.due(100, LATER)] == [first.id, third.id]
    backlog = await store.outbox.backlog()
    assert (backlog.pending, backlog.dead, backlog.failing) == (2, 1, 0)
    [dead] = await store.outbox.dead(10)
    assert (dead.id, dead.attempts, dead.last_error) == (second.id, 1, "HTTP 400: input too long")
    assert dead.dead_at is not None


async def test_retrying_dead_jobs_makes_them_due_now_with_no_attempts(store: Store) -> None:
    jobs = await _jobs(store, 3)
    await store.outbox.bury([j.id for j in jobs], "refused")
    assert await store.outbox.retry_dead([jobs[0].id, 999_999]) == 1
    assert [j.id for j in await store.outbox.due(100, LATER)] == [jobs[0].id]
    assert (await store.outbox.due(100, LATER))[0].attempts == 0
    assert await store.outbox.retry_dead([]) == 0
    assert await store.outbox.retry_dead() == 2
    assert await store.outbox.dead(10) == []
    assert (await store.outbox.backlog()).dead == 0


async def test_the_store_health_check_writes(store: Store) -> None:
    assert await store.operations.health() is None
    assert await store.operations.health() is None  # the probe row is rewritten, never duplicated
