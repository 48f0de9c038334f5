"""The domain's writes, each one unit of work: what changes, and which vector jobs that needs.

The rule "a change to embedded text enqueues its vector job in the same transaction" lives here
and nowhere else; adapters only insert, update and delete rows (``ports.unit_of_work``). Every
function is synchronous and runs inside ``UnitOfWork.run``.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.models import (
    Entity, EntityChanges, Episode, EpisodeChanges, Metadata, NewEntity, Owner, NewEpisode, NewRelationship,
    NewSummary, Relationship, Session, Summary, SummaryChanges, Upserted,
)
from domain.record_kinds import ENTITIES, EPISODES, IN_SESSIONS, KINDS, SUMMARIES, RecordKind, Source
from ports.unit_of_work import Transaction


def create_session(tx: Transaction, external_id: str, metadata: Metadata, owner: Owner = Owner()) -> Session:
    return tx.sessions.create(external_id, metadata, owner)


def update_session(tx: Transaction, session_id: int, metadata: Metadata) -> Session | None:
    return tx.sessions.update(session_id, metadata)


def delete_session(tx: Transaction, session_id: int) -> bool:
    if not tx.sessions.delete(session_id):
        return False
    for kind in IN_SESSIONS:  # its records went with it: so do their points
        tx.outbox.enqueue(kind.name, "delete_session", [session_id])
    return True


def add_episodes(tx: Transaction, new: Sequence[NewEpisode]) -> list[Episode]:
    episodes = tx.episodes.insert(new)
    tx.outbox.enqueue(EPISODES.name, "upsert", [e.id for e in episodes])
    return episodes


def update_episode(tx: Transaction, episode_id: int, changes: EpisodeChanges) -> Episode | None:
    changed = tx.episodes.update(episode_id, changes)
    if changed is None:
        return None
    before, after = changed
    if EPISODES.text(before) != EPISODES.text(after):
        tx.outbox.enqueue(EPISODES.name, "upsert", [episode_id])
    return after


def delete_episode(tx: Transaction, episode_id: int) -> bool:
    return _deleted(tx, EPISODES, tx.episodes.delete(episode_id), episode_id)


def upsert_entity(tx: Transaction, new: NewEntity) -> Upserted[Entity]:
    upserted = tx.entities.upsert(new)
    tx.outbox.enqueue(ENTITIES.name, "upsert", [upserted.item.id])
    return upserted


def update_entity(tx: Transaction, entity_id: int, changes: EntityChanges) -> Entity | None:
    return _updated(tx, ENTITIES, entity_id, tx.entities.update(entity_id, changes))


def delete_entity(tx: Transaction, entity_id: int) -> bool:
    return _deleted(tx, ENTITIES, tx.entities.delete(entity_id), entity_id)


def relate(tx: Transaction, new: NewRelationship) -> Upserted[Relationship]:
    return tx.entities.relate(new)


def unrelate(tx: Transaction, from_id: int, to_id: int, label: str) -> bool:
    return tx.entities.unrelate(from_id, to_id, label)


def add_summary(tx: Transaction, new: NewSummary) -> Summary:
    summary = tx.summaries.insert(new)
    tx.outbox.enqueue(SUMMARIES.name, "upsert", [summary.id])
    return summary


def update_summary(tx: Transaction, summary_id: int, changes: SummaryChanges) -> Summary | None:
    return _updated(tx, SUMMARIES, summary_id, tx.summaries.update(summary_id, changes))


def delete_summary(tx: Transaction, summary_id: int) -> bool:
    return _deleted(tx, SUMMARIES, tx.summaries.delete(summary_id), summary_id)


def forget_user(tx: Transaction, user_id: str) -> dict[str, int]:
    """Everything ``user_id`` owns, gone in this one unit: their sessions with the episodes and
    summaries in them, their entities and relationships (keyword rows and stored embeddings go with
    the rows), and a vector delete job for each. Answers how many of each kind went.
    Every record of a user that another part of the domain keeps (history, events) is deleted
    here too, in the same unit."""
    sessions, episodes, summaries = tx.sessions.delete_owned(user_id)
    if sessions:
        for kind in IN_SESSIONS:  # the points of the sessions' records, as delete_session does
            tx.outbox.enqueue(kind.name, "delete_session", sessions)
    entities, relationships = tx.entities.delete_owned(user_id)
    if entities:
        tx.outbox.enqueue(ENTITIES.name, "delete", entities)
    return {"sessions": len(sessions), "episodes": episodes, "summaries": summaries,
            "entities": len(entities), "relationships": relationships}


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


def reindex(tx: Transaction, collection: Source) -> int:
    """Queue an upsert job for every record of ``collection``; returns how many."""
    return tx.outbox.enqueue_every(collection)


def _updated(tx: Transaction, kind: RecordKind, record_id: int, changed: tuple | None):
    """The record after an update; its vector job when the embedded text changed (as for episodes)."""
    if changed is None:
        return None
    before, after = changed
    if kind.text(before) != kind.text(after):
        tx.outbox.enqueue(kind.name, "upsert", [record_id])
    return after


def _deleted(tx: Transaction, kind: RecordKind, deleted: bool, record_id: int) -> bool:
    if deleted:
        tx.outbox.enqueue(kind.name, "delete", [record_id])
    return deleted


def records_imported(tx: Transaction, table: str, ids: Sequence[int]) -> int:
    """Rows an import wrote straight into ``table``: a record kind's rows need their vector jobs.
    Returns how many jobs were queued."""
    if table not in KINDS:
        return 0
    tx.outbox.enqueue(KINDS[table].name, "upsert", ids)
    return len(ids)
