"""The memory store port: the one source of truth for sessions, episodes, entities,
relationships, summaries, their keyword index, and the embedding outbox that feeds the vector
index.

Every write that changes embedded text (episode, entity, summary create/update/delete, session
delete) enqueues its outbox job in the same transaction as the change, so a crash can never
leave a record that is saved but never embedded, or a point whose record is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol

from domain.keywords import KeywordQuery
from domain.models import (
    Entity,
    Episode,
    EpisodeChanges,
    KeywordHit,
    Metadata,
    Neighbours,
    NewEntity,
    NewEpisode,
    NewRelationship,
    NewSummary,
    Page,
    Relationship,
    Session,
    Summary,
    Upserted,
)
from domain.outbox import Backlog, OutboxJob

Source = Literal["episodes", "entities", "summaries"]
Direction = Literal["out", "in", "both"]


class MemoryStore(Protocol):
    """Contract shared by every store adapter (asserted by tests/contract/test_memory_store.py).

    Ids are positive integers assigned by the store, never reused. Getters return ``None`` for an
    unknown id; deletes return whether something was deleted (unknown id: ``False``, no error).
    Lists are ordered as stated and never longer than ``limit``.
    """

    supports_fts_syntax: bool
    """Whether ``KeywordQuery`` mode ``fts`` is interpreted as FTS5 syntax (else as plain terms)."""

    # -- sessions ----------------------------------------------------------------------------
    async def create_session(self, external_id: str, metadata: Metadata) -> Session:
        """Create a session; an ``external_id`` already in use raises ``Conflict``."""
        ...

    async def get_session(self, session_id: int) -> Session | None: ...

    async def get_session_by_external_id(self, external_id: str) -> Session | None: ...

    async def list_sessions(self, limit: int, offset: int) -> Page[Session]:
        """Sessions oldest first, with the total count."""
        ...

    async def update_session(self, session_id: int, metadata: Metadata) -> Session | None:
        """Replace the metadata and bump ``updated_at``; unknown id returns ``None``."""
        ...

    async def delete_session(self, session_id: int) -> bool:
        """Delete the session, its episodes and summaries (cascade) and enqueue removal of their points."""
        ...

    # -- episodes ----------------------------------------------------------------------------
    async def add_episodes(self, episodes: Sequence[NewEpisode]) -> list[Episode]:
        """Insert all episodes in one transaction (all or none), each with its embedding job.

        An unknown ``session_id`` raises ``NotFound`` (field ``sessionId``) and inserts nothing.
        """
        ...

    async def get_episode(self, episode_id: int) -> Episode | None: ...

    async def get_episodes(self, episode_ids: Sequence[int]) -> list[Episode]:
        """The episodes that exist among ``episode_ids``, in the order of the ids given."""
        ...

    async def update_episode(self, episode_id: int, changes: EpisodeChanges) -> Episode | None:
        """Apply the non-``None`` changes; a text change is re-indexed and re-embedded."""
        ...

    async def delete_episode(self, episode_id: int) -> bool: ...

    async def list_episodes(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        """A session's episodes oldest first (created_at, then id), with the total count."""
        ...

    async def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        """A session's newest ``limit`` episodes, newest first."""
        ...

    async def episode_neighbours(self, episode_ids: Sequence[int], window: int) -> dict[int, Neighbours]:
        """For each existing episode of ``episode_ids``, the ids of up to ``window`` episodes on each
        side of it in its session's order (created_at, then id), nearest first. Unknown ids are left out."""
        ...

    # -- keyword search ----------------------------------------------------------------------
    async def keyword_search(
        self,
        source: Source,
        query: KeywordQuery,
        limit: int,
        session_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[KeywordHit]:
        """Best first (BM25 or the adapter's equivalent), at most ``limit`` hits.

        ``all``: every term must occur; ``any``: at least one. Terms are matched as words, never
        as syntax. An empty query returns no hits. In ``fts`` mode a syntax error raises
        ``Invalid`` (field ``q``). ``session_id`` does not apply to entities.
        """
        ...

    # -- entities and relationships ----------------------------------------------------------
    async def upsert_entity(self, entity: NewEntity) -> Upserted[Entity]:
        """Create by (name, type), or update notes/metadata of the existing one (``created`` False)."""
        ...

    async def get_entity(self, entity_id: int) -> Entity | None: ...

    async def get_entities(self, entity_ids: Sequence[int]) -> list[Entity]:
        """The entities that exist among ``entity_ids``, in the order given."""
        ...

    async def list_entities_by_type(self, entity_type: str, limit: int, offset: int) -> Page[Entity]:
        """Entities of one type ordered by name, then id."""
        ...

    async def find_entities_by_name(self, name: str, limit: int) -> list[Entity]:
        """Case-insensitive substring match on name; exact matches first, then by name."""
        ...

    async def entities_mentioned_in(self, texts: Sequence[str], limit: int) -> list[Entity]:
        """Entities whose name occurs (case-insensitively, as a word) in any of ``texts``."""
        ...

    async def delete_entity(self, entity_id: int) -> bool:
        """Delete the entity and every relationship from or to it."""
        ...

    async def upsert_relationship(self, relationship: NewRelationship) -> Upserted[Relationship]:
        """Create by (from_id, to_id, label) or update its metadata; an unknown end raises ``NotFound``."""
        ...

    async def relationships_of(self, entity_id: int, direction: Direction) -> list[Relationship]:
        """Edges out of / into / both ways of an entity, oldest first."""
        ...

    async def delete_relationship(self, from_id: int, to_id: int, label: str) -> bool: ...

    # -- summaries ---------------------------------------------------------------------------
    async def add_summary(self, summary: NewSummary) -> Summary:
        """Insert a summary with its embedding job; an unknown session raises ``NotFound``."""
        ...

    async def get_summary(self, summary_id: int) -> Summary | None: ...

    async def get_summaries(self, summary_ids: Sequence[int]) -> list[Summary]: ...

    async def list_summaries(self, session_id: int) -> list[Summary]:
        """A session's summaries oldest first."""
        ...

    async def delete_summary(self, summary_id: int) -> bool: ...

    # -- embedding outbox --------------------------------------------------------------------
    async def due_jobs(self, limit: int, now: datetime) -> list[OutboxJob]:
        """Jobs whose retry time has come, oldest first; a job stays until completed."""
        ...

    async def complete_jobs(self, job_ids: Sequence[int]) -> None:
        """Remove finished jobs; unknown ids are a no-op."""
        ...

    async def defer_jobs(self, job_ids: Sequence[int], error: str, retry_at: datetime) -> None:
        """Record a failed attempt: bump attempts, keep the error, hide the jobs until ``retry_at``."""
        ...

    async def bury_jobs(self, job_ids: Sequence[int], error: str) -> None:
        """Give up on jobs (dead letters): bump attempts, keep the error, set ``dead_at``; a dead
        job is never due and is not counted as pending, but stays until retried."""
        ...

    async def dead_jobs(self, limit: int) -> list[OutboxJob]:
        """Dead-lettered jobs, oldest first, at most ``limit``."""
        ...

    async def retry_dead_jobs(self, job_ids: Sequence[int] | None = None) -> int:
        """Make dead jobs (those named, or all when ``None``) due now with no attempts; returns
        how many were revived. Unknown or live ids are ignored."""
        ...

    async def backlog(self) -> Backlog:
        """Live jobs (pending, failing, oldest, last error) and the number of dead ones."""
        ...

    async def enqueue_reindex(self, collection: Source) -> int:
        """Queue an upsert job for every record of ``collection``; returns how many."""
        ...

    # -- operations --------------------------------------------------------------------------
    async def counts(self) -> dict[str, int]:
        """Row counts per table: sessions, episodes, entities, relationships, summaries, embedding_outbox."""
        ...

    async def sizes(self) -> dict[str, int]:
        """Bytes on disk: ``database`` and each keyword index (``episodes_fts``...); a store
        without files (in memory) answers ``{}``."""
        ...

    async def health(self) -> str | None:
        """``None`` when the store can write (a real write, not just a read), else a short
        description of the problem; never raises."""
        ...

    async def close(self) -> None: ...
