"""The domain's writes, each one unit of work: what changes, and which vector jobs that needs.

The rule "a change to embedded text enqueues its vector job in the same transaction" lives here
and nowhere else; adapters only insert, update and delete rows (``ports.unit_of_work``). Every
function is synchronous and runs inside ``UnitOfWork.run``.

So do the cross-cutting appends (``domain.changes``): every create/update/delete appends an event
to the change feed (``_event``), every update/delete of an episode, entity, relationship or summary
appends a version to its history (``_versioned``) — in the same transaction as the change. A new
write function (a PATCH, a bulk delete) calls these two helpers the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from typing import Any

from domain import changes
from domain.errors import Conflict, Invalid
from domain.models import (
    Entity, EntityChanges, Episode, EpisodeChanges, Metadata, NewEntity, NewEpisode, NewRelationship,
    NewSummary, Owner, Relationship, Session, Summary, SummaryChanges, Upserted, check_changes, utc_now,
)
from domain.outbox import OutboxJob
from domain.record_kinds import ENTITIES, EPISODES, IN_SESSIONS, KINDS, SUMMARIES, RecordKind, Source
from ports.unit_of_work import Transaction

RELATIONSHIPS = "relationships"  # not a record kind (not embedded), but it has history and events


def _event(tx: Transaction, kind: str, record: Any, op: changes.EventOp, at: str | None = None) -> None:
    session_id = record.id if kind == "sessions" else getattr(record, "session_id", None)
    tx.events.append(kind, record.id, op, at or utc_now(), session_id, changes.owner_of(record))


def _versioned(tx: Transaction, kind: str, before: Any, after: Any | None) -> None:
    """Append the version (and the event) of one update (``after`` given) or delete (``after`` None)."""
    old, new = changes.image(before), None if after is None else changes.image(after)
    changed = changes.changed_fields(old, new)
    op: changes.HistoryOp = "deleted" if after is None else "updated"
    at = utc_now()
    tx.history.append(kind, before.id, op, at, changes.actor.get(), old, new, changed,
                      getattr(before, "session_id", None), changes.owner_of(before))
    _event(tx, kind, before, op, at)


def forget_history_of_user(tx: Transaction, user_id: str) -> int:
    """Forgetting a user forgets the history of every record they owned (call it in the unit that
    deletes the user's records); returns how many versions went."""
    return tx.history.forget_user(user_id)


def forget_history(tx: Transaction, kind: str, record_ids: Sequence[int]) -> int:
    """Forget the history of named records (e.g. a user's records, by id); returns how many versions."""
    return tx.history.forget_records(kind, record_ids)


def create_session(tx: Transaction, external_id: str, metadata: Metadata, owner: Owner = Owner()) -> Session:
    session = tx.sessions.create(external_id, metadata, owner)
    _event(tx, "sessions", session, "created")
    return session


def update_session(tx: Transaction, session_id: int, metadata: Metadata) -> Session | None:
    session = tx.sessions.update(session_id, metadata)
    if session is not None:
        _event(tx, "sessions", session, "updated")
    return session


def delete_session(tx: Transaction, session_id: int) -> bool:
    """A session's episodes and summaries go with it, and so does their history (forgetting a
    conversation forgets how its records changed); the feed says ``sessions deleted`` once."""
    if not tx.sessions.delete(session_id):
        return False
    for kind in IN_SESSIONS:  # its records went with it: so do their points
        tx.outbox.enqueue(kind.name, "delete_session", [session_id])
    tx.history.forget_session(session_id)
    tx.events.append("sessions", session_id, "deleted", utc_now(), session_id, None)
    return True


def add_episodes(tx: Transaction, new: Sequence[NewEpisode]) -> list[Episode]:
    episodes = tx.episodes.insert(new)
    tx.outbox.enqueue(EPISODES.name, "upsert", [e.id for e in episodes])
    at = utc_now()
    for episode in episodes:
        _event(tx, EPISODES.name, episode, "created", at)
    return episodes


def _expired(record: Any) -> bool:
    """Whether a record read inside a transaction (those reads do not hide expired rows, the sweep
    needs them) has expired: a change must not reach it, as no read does."""
    return record is not None and record.expires_at is not None and record.expires_at <= utc_now()


def update_episode(tx: Transaction, episode_id: int, changes: EpisodeChanges) -> Episode | None:
    check_changes(changes)  # None on a required field never reaches a store (KEEP leaves it)
    if _expired(tx.episodes.get(episode_id)):
        return None
    return _updated(tx, EPISODES, episode_id, tx.episodes.update(episode_id, changes))


def delete_episode(tx: Transaction, episode_id: int) -> bool:
    before = tx.episodes.get(episode_id)
    return _deleted(tx, EPISODES, before, tx.episodes.delete(episode_id))


def upsert_entity(tx: Transaction, new: NewEntity) -> Upserted[Entity]:
    upserted = tx.entities.upsert(new)
    tx.outbox.enqueue(ENTITIES.name, "upsert", [upserted.item.id])
    if upserted.before is None:
        _event(tx, ENTITIES.name, upserted.item, "created")
    else:
        _versioned(tx, ENTITIES.name, upserted.before, upserted.item)
    return upserted


def update_entity(tx: Transaction, entity_id: int, changes: EntityChanges) -> Entity | None:
    check_changes(changes)
    if _expired(tx.entities.get(entity_id)):
        return None
    return _updated(tx, ENTITIES, entity_id, tx.entities.update(entity_id, changes))


def delete_entity(tx: Transaction, entity_id: int) -> bool:
    before, edges = tx.entities.get(entity_id), tx.entities.edges_of(entity_id)
    deleted = _deleted(tx, ENTITIES, before, tx.entities.delete(entity_id))
    if deleted:
        for edge in edges:  # its relationships went with it
            _versioned(tx, RELATIONSHIPS, edge, None)
    return deleted


def relate(tx: Transaction, new: NewRelationship) -> Upserted[Relationship]:
    """Upsert an edge of (from, to, label) of the new edge's owner (``user_id``; None: global) —
    the owner is part of what a relationship is, as of an entity, so one user's fact neither
    replaces nor blocks another user's or a global one. Which edge: the owner's edge of the triple
    that began at the given ``valid_from``; else its open edge (no ``valid_to``) — unless the new
    edge is a closed interval wholly before it, which is a separate past edge. None of those: a
    new edge. Without owners or validity this is the seed's upsert by triple exactly.
    ``supersedes`` first closes the owner's other open edges of (from, label) where the new one
    begins (or now)."""
    if new.valid_from is not None and new.valid_to is not None and new.valid_to <= new.valid_from:
        raise Invalid("validTo must be later than validFrom", field="validTo")
    same = [e for e in tx.entities.edges(new.from_id, new.label, new.to_id) if e.user_id == new.user_id]
    target = next((e for e in same if new.valid_from is not None and e.valid_from == new.valid_from), None)
    current = next((e for e in same if e.valid_to is None), None)
    before_current = (current is not None and new.valid_to is not None and current.valid_from is not None
                      and new.valid_to <= current.valid_from)
    if target is not None and new.valid_to is None and current is not None and current.id != target.id:
        # Reopening an edge that ended would give the triple two open edges.
        raise Conflict(f"relationship {current.id} of this triple is open: edge {target.id}, which ended, cannot "
                       "be reopened while it is (give validTo, or close the open one first)", field="validTo")
    if new.supersedes:
        begins = new.valid_from or utc_now()
        for old in tx.entities.edges(new.from_id, new.label):
            if old.valid_to is None and old.to_id != new.to_id and old.user_id == new.user_id:
                end = max(begins, old.valid_from) if old.valid_from else begins
                _versioned(tx, RELATIONSHIPS, old, tx.entities.set_edge(old.id, old.metadata, old.valid_from, end))
    if target is not None:
        upserted = Upserted(tx.entities.set_edge(target.id, new.metadata, target.valid_from, new.valid_to), False,
                            target)
    elif before_current:
        upserted = Upserted(tx.entities.add_edge(new), True)
    else:
        upserted = tx.entities.relate(new)
    after = upserted.item
    if after.valid_from is not None and after.valid_to is not None and after.valid_to <= after.valid_from:
        raise Invalid("validTo must be later than validFrom", field="validTo")
    if upserted.before is None:
        _event(tx, RELATIONSHIPS, after, "created")
    else:
        _versioned(tx, RELATIONSHIPS, upserted.before, after)
    return upserted


def unrelate(tx: Transaction, from_id: int, to_id: int, label: str, user_id: str | None = None) -> bool:
    """Delete the edges of (from, to, label), open and closed — with ``user_id`` only that user's;
    each gets its ``deleted`` version."""
    edges = [e for e in tx.entities.edges(from_id, label, to_id) if user_id is None or e.user_id == user_id]
    if not tx.entities.unrelate(from_id, to_id, label, user_id):
        return False
    for edge in edges:
        _versioned(tx, RELATIONSHIPS, edge, None)
    return True


def add_summary(tx: Transaction, new: NewSummary) -> Summary:
    summary = tx.summaries.insert(new)
    tx.outbox.enqueue(SUMMARIES.name, "upsert", [summary.id])
    _event(tx, SUMMARIES.name, summary, "created")
    return summary


def update_summary(tx: Transaction, summary_id: int, changes: SummaryChanges) -> Summary | None:
    check_changes(changes)
    if _expired(tx.summaries.get(summary_id)):
        return None
    return _updated(tx, SUMMARIES, summary_id, tx.summaries.update(summary_id, changes))


def delete_summary(tx: Transaction, summary_id: int) -> bool:
    before = tx.summaries.get(summary_id)
    return _deleted(tx, SUMMARIES, before, tx.summaries.delete(summary_id))


def jobs_completed(tx: Transaction, jobs: Sequence[OutboxJob]) -> int:
    """The worker finished ``jobs`` (outbox jobs as it claimed them): those whose claim it still
    holds go, and each upsert among them of a record that still exists means it is now embedded
    (an ``embedded`` event, with its session and owner). A job claimed again since the worker's
    lease ran out is its new holder's to complete, and to announce. Returns how many went."""
    removed = set(tx.outbox.complete(jobs))
    at = utc_now()
    for job in {job.id: job for job in jobs if job.id in removed}.values():
        if job.op == "upsert" and job.collection in KINDS:
            record = getattr(tx, KINDS[job.collection].room).get(job.ref_id)
            if record is not None:
                _event(tx, job.collection, record, "embedded", at)
    return len(removed)


def forget_user(tx: Transaction, user_id: str) -> dict[str, int]:
    """Everything ``user_id`` owns, gone in this one unit: their sessions with the episodes and
    summaries in them, their entities and relationships (keyword rows and stored embeddings go with
    the rows), and a vector delete job for each. Answers how many of each kind went.
    The history of everything they owned is deleted in the same unit."""
    sessions, episodes, summaries = tx.sessions.delete_owned(user_id)
    if sessions:
        for kind in IN_SESSIONS:  # the points of the sessions' records, as delete_session does
            tx.outbox.enqueue(kind.name, "delete_session", sessions)
    entities, relationships = tx.entities.delete_owned(user_id)
    if entities:
        tx.outbox.enqueue(ENTITIES.name, "delete", entities)
    history = forget_history_of_user(tx, user_id)  # forgetting means forgetting: their versions too
    history += sum(tx.history.forget_session(session_id) for session_id in sessions)  # and their sessions'
    return {"sessions": len(sessions), "episodes": episodes, "summaries": summaries,
            "entities": len(entities), "relationships": relationships, "history": history}


def purge_expired(tx: Transaction, now: str, limit: int) -> dict[str, int]:
    """Delete up to ``limit`` expired records of each kind (rows, keyword rows and stored embeddings
    go together) and queue their vector deletes; answers how many per kind."""
    purged: dict[str, int] = {}
    for kind in KINDS.values():
        ids = getattr(tx, kind.room).delete_expired(now, limit)
        if ids:
            tx.outbox.enqueue(kind.name, "delete", ids)
        purged[kind.name] = len(ids)
    return purged


def purge_expired_keys(tx: Transaction, now: str, limit: int) -> int:
    """Delete up to ``limit`` idempotency keys expired by ``now``; answers how many."""
    return tx.idempotency.delete_expired(now, limit)


def reindex(tx: Transaction, collection: Source) -> int:
    """Queue an upsert job for every record of ``collection``; returns how many."""
    return tx.outbox.enqueue_every(collection)


def _updated(tx: Transaction, kind: RecordKind, record_id: int, changed: tuple | None):
    """The record after an update; its vector job when the embedded text changed, and its version
    in the history (as for episodes)."""
    if changed is None:
        return None
    before, after = changed
    if kind.text(before) != kind.text(after):
        tx.outbox.enqueue(kind.name, "upsert", [record_id])
    _versioned(tx, kind.name, before, after)
    return after


def _deleted(tx: Transaction, kind: RecordKind, before: Any, deleted: bool) -> bool:
    if deleted:
        tx.outbox.enqueue(kind.name, "delete", [before.id])
        _versioned(tx, kind.name, before, None)
    return deleted


def records_imported(tx: Transaction, table: str, ids: Sequence[int]) -> int:
    """Rows an import wrote straight into ``table``: a record kind's rows need their vector jobs.
    Returns how many jobs were queued."""
    if table not in KINDS:
        return 0
    tx.outbox.enqueue(KINDS[table].name, "upsert", ids)
    return len(ids)
