"""The embedding outbox: durable jobs that keep the vector index in step with the store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

JobOp = Literal["upsert", "delete", "delete_session"]

# How long jobs a worker claimed stay hidden from every other claim: far beyond one embedding
# batch, so a live worker settles them first; a worker that died leaves them due again after it.
CLAIM_LEASE = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class OutboxJob:
    """One pending change to a vector collection.

    ``upsert``: (re-)embed record ``ref_id`` of ``collection`` (a record that no longer exists is
    deleted instead); ``delete``: remove point ``ref_id``; ``delete_session``: remove every point
    whose payload ``sessionId`` is ``ref_id``.

    ``next_attempt_at`` is the job's retry time as the store held it when the job was read. For a
    job handed out by ``claim`` it is the lease's end, set by that claim alone: the token by which
    a give-back (release, defer, bury, complete) tells the claim's holder from a worker whose lease
    ran out and whose job another claim has taken since.
    """

    id: int
    collection: str
    op: JobOp
    ref_id: int
    attempts: int
    created_at: str
    next_attempt_at: str
    last_error: str | None = None
    dead_at: str | None = None  # set when the job was given up on (a dead letter)


@dataclass(frozen=True, slots=True)
class Backlog:
    pending: int
    oldest_created_at: str | None
    last_error: str | None
    failing: int = 0
    dead: int = 0  # dead-lettered jobs, not counted in ``pending``


@dataclass(frozen=True, slots=True)
class OutboxScope:
    """The records a search reads: one session, and/or the sessions of a user / agent; empty: all.

    Entities belong to no session or agent: only ``user_id`` narrows them."""

    session_id: int | None = None
    user_id: str | None = None
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class ScopePending:
    """The live upsert jobs of records in a scope: the oldest ``jobs`` (as many as asked for) and
    how many there are in all."""

    jobs: list[OutboxJob]
    total: int
