"""The ``EmbeddingOutbox`` port over every adapter, with the jobs the domain's writes enqueue
(``domain.writes`` through the unit of work): the rule and its storage, asserted together.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from domain import writes
from domain.outbox import CLAIM_LEASE, OutboxScope
from domain.models import EpisodeChanges, NewEntity, NewEpisode, NewSummary, Owner
from ports.store import Store
from tests.contract.store_helpers import LATER, due_jobs_of_new_episodes, FAR_FUTURE, a_session, complete_due, jobs


async def test_writes_of_embedded_text_enqueue_upserts(store: Store) -> None:
    session = await a_session(store)
    e1, e2 = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a"), NewEpisode(session.id, "u", "a")]))
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "s")))
    assert await jobs(store) == [
        ("episodes", "upsert", e1.id), ("episodes", "upsert", e2.id),
        ("entities", "upsert", entity.id), ("summaries", "upsert", summary.id),
    ]
    assert all(j.attempts == 0 and j.last_error is None for j in await store.outbox.due(10, FAR_FUTURE))


async def test_creating_a_session_enqueues_nothing(store: Store) -> None:
    await a_session(store)
    assert await jobs(store) == []


async def test_an_episode_text_change_is_re_embedded_but_a_metadata_change_is_not(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
    await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(metadata={"x": 1}, token_count=4)))
    await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(user_message="u")))  # the same text again
    assert len(await jobs(store)) == 1
    await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(ai_response="another answer")))
    assert await jobs(store) == [("episodes", "upsert", episode.id)] * 2


async def test_deletes_enqueue_point_removals(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "s")))
    await complete_due(store)
    await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id))
    await store.uow.run(lambda tx: writes.delete_entity(tx, entity.id))
    await store.uow.run(lambda tx: writes.delete_summary(tx, summary.id))
    await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id))  # unknown now: nothing more to remove
    assert await jobs(store) == [
        ("episodes", "delete", episode.id), ("entities", "delete", entity.id), ("summaries", "delete", summary.id),
    ]


async def test_deleting_a_session_enqueues_a_session_delete_for_episodes_and_summaries(store: Store) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
    await complete_due(store)
    await store.uow.run(lambda tx: writes.delete_session(tx, session.id))
    await store.uow.run(lambda tx: writes.delete_session(tx, session.id))
    assert sorted(await jobs(store)) == [
        ("episodes", "delete_session", session.id), ("summaries", "delete_session", session.id),
    ]


async def test_due_jobs_are_oldest_first_and_limited(store: Store) -> None:
    session = await a_session(store)
    added = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a") for i in range(5)]))
    due = await store.outbox.due(3, datetime.now(UTC))
    assert [j.ref_id for j in due] == [e.id for e in added[:3]]
    assert [j.id for j in due] == sorted(j.id for j in due)
    assert await store.outbox.due(3, datetime.now(UTC)) == due  # a job stays until completed


async def test_a_deferred_job_is_hidden_until_its_retry_time(store: Store) -> None:
    session = await a_session(store)
    first, second = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a"), NewEpisode(session.id, "u", "a")]))
    now = datetime.now(UTC)
    [job, other] = await store.outbox.due(10, now)
    await store.outbox.defer([job], "embedder down", now + timedelta(hours=1))
    assert [j.id for j in await store.outbox.due(10, now)] == [other.id]
    back = await store.outbox.due(10, now + timedelta(hours=2))
    assert [j.id for j in back] == [job.id, other.id]
    assert (back[0].attempts, back[0].last_error, back[0].ref_id) == (1, "embedder down", first.id)
    await store.outbox.defer([back[0]], "still down", now + timedelta(hours=3))
    again = (await store.outbox.due(10, FAR_FUTURE))[0]
    assert (again.attempts, again.last_error) == (2, "still down")


async def test_completing_jobs_removes_them_and_unknown_ids_are_a_no_op(store: Store) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a"), NewEpisode(session.id, "u", "a")]))
    [done, left] = await store.outbox.due(10, FAR_FUTURE)
    assert await store.uow.run(lambda tx: writes.jobs_completed(tx, [done])) == 1
    unknown = replace(left, id=99_999)
    assert await store.uow.run(lambda tx: tx.outbox.complete([unknown])) == []
    assert await store.uow.run(lambda tx: tx.outbox.complete([])) == []
    assert await store.outbox.defer([unknown], "nothing", FAR_FUTURE) == 0
    assert [j.id for j in await store.outbox.due(10, FAR_FUTURE)] == [left.id]


async def test_the_backlog_counts_pending_jobs_their_age_and_failures(store: Store) -> None:
    empty = await store.outbox.backlog()
    assert (empty.pending, empty.oldest_created_at, empty.last_error, empty.failing) == (0, None, None, 0)
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a") for i in range(3)]))
    jobs_now = await store.outbox.due(10, FAR_FUTURE)
    await store.outbox.defer([jobs_now[0]], "timeout", FAR_FUTURE)
    await store.outbox.defer([jobs_now[1]], "connection refused", FAR_FUTURE)
    backlog = await store.outbox.backlog()
    assert (backlog.pending, backlog.failing) == (3, 2)
    assert backlog.oldest_created_at == min(j.created_at for j in jobs_now)
    assert backlog.last_error in {"timeout", "connection refused"}


async def test_reindex_queues_one_upsert_per_record(store: Store) -> None:
    session = await a_session(store)
    episodes = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a") for i in range(3)]))
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))
    await complete_due(store)
    assert await store.uow.run(lambda tx: writes.reindex(tx, "episodes")) == 3
    assert await store.uow.run(lambda tx: writes.reindex(tx, "summaries")) == 0
    assert await jobs(store) == [("episodes", "upsert", e.id) for e in episodes]
    assert await store.uow.run(lambda tx: writes.reindex(tx, "entities")) == 1
    assert (await store.outbox.backlog()).pending == 4


async def test_a_buried_job_is_never_due_and_is_counted_apart_from_the_pending(store: Store) -> None:
    first, second, third = await due_jobs_of_new_episodes(store, 3)
    await store.outbox.bury([second], "HTTP 400: input too long")
    assert [j.id for j in await store.outbox.due(100, LATER)] == [first.id, third.id]
    backlog = await store.outbox.backlog()
    assert (backlog.pending, backlog.dead, backlog.failing) == (2, 1, 0)
    [dead] = await store.outbox.dead(10)
    assert (dead.id, dead.attempts, dead.last_error) == (second.id, 1, "HTTP 400: input too long")
    assert dead.dead_at is not None


async def test_retrying_dead_jobs_makes_them_due_now_with_no_attempts(store: Store) -> None:
    jobs = await due_jobs_of_new_episodes(store, 3)
    await store.outbox.bury(jobs, "refused")
    assert await store.outbox.retry_dead([jobs[0].id, 999_999]) == 1
    assert [j.id for j in await store.outbox.due(100, LATER)] == [jobs[0].id]
    assert (await store.outbox.due(100, LATER))[0].attempts == 0
    assert await store.outbox.retry_dead([]) == 0
    assert await store.outbox.retry_dead() == 2
    assert await store.outbox.dead(10) == []
    assert (await store.outbox.backlog()).dead == 0


async def test_a_claimed_job_is_claimed_once_until_its_lease_ends(store: Store) -> None:
    added = await due_jobs_of_new_episodes(store, 3)
    now = datetime.now(UTC)
    first = await store.outbox.claim(2, now)
    assert [j.id for j in first] == [j.id for j in added[:2]]
    assert [j.id for j in await store.outbox.claim(10, now)] == [added[2].id]
    assert await store.outbox.claim(10, now) == []
    assert [j.id for j in await store.outbox.due(10, now + CLAIM_LEASE)] == [j.id for j in added]  # still there
    assert [j.id for j in await store.outbox.claim(10, now + CLAIM_LEASE)] == [j.id for j in added]


async def test_concurrent_claims_never_share_a_job(store: Store) -> None:
    added = await due_jobs_of_new_episodes(store, 40)
    now = datetime.now(UTC)
    batches = await asyncio.gather(*(store.outbox.claim(7, now) for _ in range(8)))
    taken = [j.id for batch in batches for j in batch]
    assert sorted(taken) == sorted(j.id for j in added)


async def test_pending_in_scope_lists_the_live_upserts_of_one_session_oldest_first(store: Store) -> None:
    mine, other = await a_session(store, "mine"), await a_session(store, "other")
    e1, e2, e3 = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(mine.id, "u", "a")] * 3))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(other.id, "u", "a")]))
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(mine.id, "s")))
    pending = await store.outbox.pending_in_scope("episodes", OutboxScope(session_id=mine.id), 2)
    assert [j.ref_id for j in pending.jobs] == [e1.id, e2.id] and pending.total == 3
    assert (await store.outbox.pending_in_scope("summaries", OutboxScope(session_id=mine.id), 10)).total == 1
    assert (await store.outbox.pending_in_scope("episodes", OutboxScope(), 10)).total == 4
    assert (await store.outbox.pending_in_scope("episodes", OutboxScope(session_id=mine.id), 0)).jobs == []


async def test_pending_in_scope_leaves_out_completed_dead_and_deleted_records(store: Store) -> None:
    session = await a_session(store)
    e1, e2, e3 = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")] * 3))
    by_ref = {j.ref_id: j for j in await store.outbox.due(10, FAR_FUTURE)}
    await store.uow.run(lambda tx: writes.jobs_completed(tx, [by_ref[e1.id]]))
    await store.outbox.bury([by_ref[e2.id]], "poison")
    await store.outbox.defer([by_ref[e3.id]], "down", FAR_FUTURE)  # deferred still counts: not embedded yet
    pending = await store.outbox.pending_in_scope("episodes", OutboxScope(session_id=session.id), 10)
    assert [j.ref_id for j in pending.jobs] == [e3.id] and pending.total == 1
    await store.uow.run(lambda tx: writes.delete_episode(tx, e3.id))
    assert (await store.outbox.pending_in_scope("episodes", OutboxScope(session_id=session.id), 10)).total == 0


async def test_pending_in_scope_follows_the_owner_of_sessions_and_entities(store: Store) -> None:
    ana = await store.uow.run(lambda tx: writes.create_session(tx, "ana-1", {}, Owner("ana", "bot")))
    ben = await store.uow.run(lambda tx: writes.create_session(tx, "ben-1", {}, Owner("ben")))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(ana.id, "u", "a"), NewEpisode(ben.id, "u", "a")]))
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", user_id="ana")))
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Bo", "person", user_id="ben")))
    assert (await store.outbox.pending_in_scope("episodes", OutboxScope(user_id="ana"), 10)).total == 1
    assert (await store.outbox.pending_in_scope("episodes", OutboxScope(agent_id="bot"), 10)).total == 1
    assert (await store.outbox.pending_in_scope("episodes", OutboxScope(user_id="ben", agent_id="bot"), 10)).total == 0
    entities = await store.outbox.pending_in_scope("entities", OutboxScope(session_id=ana.id, user_id="ana"), 10)
    assert entities.total == 1


async def test_a_records_later_job_waits_while_an_earlier_one_is_claimed_or_backing_off(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
    now = datetime.now(UTC)
    [first] = await store.outbox.claim(10, now)
    await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(user_message="edited")))
    [other] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")]))
    soon = now + timedelta(seconds=1)  # the new jobs are due, the first's lease runs
    assert [j.ref_id for j in await store.outbox.claim(10, soon)] == [other.id]  # the edit waits for the first
    await store.outbox.defer([first], "down", now + timedelta(seconds=5))
    assert await store.outbox.claim(10, soon) == []  # backing off holds the record as well
    later = now + timedelta(seconds=5)
    assert [(j.ref_id, j.id == first.id) for j in await store.outbox.claim(10, later)] == [
        (episode.id, True), (episode.id, False)]  # due together: taken together


async def test_concurrent_claims_never_put_one_record_in_two_claims(store: Store) -> None:
    session = await a_session(store)
    episodes = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")] * 10))
    for round_ in range(2):
        for e in episodes:
            await store.uow.run(lambda tx, e=e: writes.update_episode(tx, e.id, EpisodeChanges(user_message=f"v{round_}")))
    now = datetime.now(UTC) + timedelta(seconds=1)
    batches = await asyncio.gather(*(store.outbox.claim(4, now) for _ in range(8)))
    records = [{j.ref_id for j in batch} for batch in batches]
    assert sum(len(r) for r in records) == len(set().union(*records))


async def test_a_claim_of_named_jobs_takes_only_those_that_are_free(store: Store) -> None:
    session = await a_session(store)
    e1, e2, e3 = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a")] * 3))
    now = datetime.now(UTC)
    by_ref = {j.ref_id: j for j in await store.outbox.due(10, now)}
    [taken] = await store.outbox.claim(10, now, only=[by_ref[e1.id].id])
    assert taken.id == by_ref[e1.id].id
    await store.uow.run(lambda tx: writes.update_episode(tx, e1.id, EpisodeChanges(user_message="edited")))
    edit = max(j.id for j in await store.outbox.due(10, now + timedelta(seconds=1)) if j.ref_id == e1.id)
    # The edit's job waits for the claimed one; e2's is free; an unknown id is nothing.
    assert [j.id for j in await store.outbox.claim(10, now + timedelta(seconds=1), only=[edit, by_ref[e2.id].id, 10**9])] \
        == [by_ref[e2.id].id]
    assert await store.outbox.claim(10, now, only=[]) == []
    assert [j.ref_id for j in await store.outbox.claim(10, now)] == [e3.id]


async def test_released_jobs_are_due_at_once_with_their_attempts_unchanged(store: Store) -> None:
    added = await due_jobs_of_new_episodes(store, 2)
    now = datetime.now(UTC)
    claimed = await store.outbox.claim(10, now)
    assert await store.outbox.claim(10, now) == []
    assert await store.outbox.bury([claimed[1]], "poison") == 1
    assert await store.outbox.release(claimed, now) == 1
    again = await store.outbox.claim(10, now)
    assert [(j.id, j.attempts) for j in again] == [(added[0].id, 0)]  # the dead one stays dead


# -- give-backs act only for the claim's current holder ------------------------------------------
async def a_job_claimed_again_after_its_lease(store: Store):
    """One job, claimed by a first worker, claimed again by a second once the first's lease ran
    out: the time of the second claim, the first worker's (stale) job and the second's."""
    [added] = await due_jobs_of_new_episodes(store, 1)
    now = datetime.now(UTC)
    [stale] = await store.outbox.claim(10, now)
    later = now + CLAIM_LEASE
    [held] = await store.outbox.claim(10, later)
    assert stale.id == held.id == added.id and stale.next_attempt_at != held.next_attempt_at
    return later, stale, held


async def test_a_worker_whose_lease_ran_out_releases_defers_and_buries_nothing(store: Store) -> None:
    later, stale, held = await a_job_claimed_again_after_its_lease(store)
    assert await store.outbox.release([stale], later) == 0
    assert await store.outbox.defer([stale], "timed out", later) == 0
    assert await store.outbox.bury([stale], "poison") == 0
    assert await store.outbox.claim(10, later) == []  # still the second worker's
    [job] = await store.outbox.due(10, later + CLAIM_LEASE)
    assert (job.attempts, job.last_error, job.dead_at, job.next_attempt_at) == (0, None, None, held.next_attempt_at)
    assert (await store.outbox.backlog()).dead == 0


async def test_a_worker_whose_lease_ran_out_completes_nothing_and_announces_nothing(store: Store) -> None:
    later, stale, held = await a_job_claimed_again_after_its_lease(store)
    assert await store.uow.run(lambda tx: tx.outbox.complete([stale])) == []
    assert await store.uow.run(lambda tx: writes.jobs_completed(tx, [stale])) == 0
    assert [j.id for j in await store.outbox.due(10, FAR_FUTURE)] == [held.id]
    assert "embedded" not in [e.op for e in await store.events.after(0, 100)]
    assert await store.uow.run(lambda tx: writes.jobs_completed(tx, [held])) == 1
    assert await store.outbox.due(10, FAR_FUTURE) == []
    assert [(e.record_id, e.op) for e in await store.events.after(0, 100) if e.op == "embedded"] == [
        (held.ref_id, "embedded")]


async def test_the_current_holders_give_backs_still_act(store: Store) -> None:
    later, stale, held = await a_job_claimed_again_after_its_lease(store)
    await store.outbox.release([stale], later)
    assert await store.outbox.release([held], later) == 1
    [again] = await store.outbox.claim(10, later)  # due at once
    retry_at = later + timedelta(seconds=5)
    assert await store.outbox.defer([again], "timed out", retry_at) == 1
    assert await store.outbox.defer([again], "timed out", retry_at) == 0  # handled: no longer held
    [third] = await store.outbox.claim(10, retry_at)
    assert third.attempts == 1
    assert await store.outbox.bury([third], "poison") == 1
    [dead] = await store.outbox.dead(10)
    assert (dead.id, dead.attempts, dead.last_error) == (held.id, 2, "poison")


async def test_a_give_back_of_several_jobs_acts_on_those_still_held_alone(store: Store) -> None:
    added = await due_jobs_of_new_episodes(store, 2)
    now = datetime.now(UTC)
    mine = await store.outbox.claim(10, now)
    later = now + CLAIM_LEASE
    [taken] = await store.outbox.claim(1, later)  # the lease ran out; another worker took the first job
    assert [j.id for j in mine] == [j.id for j in added] and taken.id == added[0].id
    assert await store.outbox.defer(mine, "timed out", FAR_FUTURE) == 1
    by_id = {j.id: j for j in await store.outbox.due(10, FAR_FUTURE)}
    assert (by_id[taken.id].attempts, by_id[taken.id].next_attempt_at) == (0, taken.next_attempt_at)
    assert by_id[added[1].id].attempts == 1


async def test_a_give_back_of_thousands_of_jobs_acts_on_every_one(store: Store) -> None:
    # Several statements' worth where an adapter splits a give-back (SQLite bounds its parameters).
    await store.uow.run(lambda tx: tx.outbox.enqueue("episodes", "upsert", range(1, 12_002)))
    now = datetime.now(UTC)
    claimed = await store.outbox.claim(20_000, now)
    assert len(claimed) == 12_001
    assert await store.outbox.release(claimed, now) == 12_001
    again = await store.outbox.claim(20_000, now)
    assert await store.uow.run(lambda tx: tx.outbox.complete(again)) == [j.id for j in again]
    assert (await store.outbox.backlog()).pending == 0
