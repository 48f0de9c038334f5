"""Episodes: one exchange (user message, assistant response) in a session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from domain.models import Episode, EpisodeChanges, Neighbours, NewEpisode, Page


class Episodes(Protocol):
    """Reads. Unknown ids are left out of lists and read ``None`` one at a time."""

    async def get(self, episode_id: int) -> Episode | None: ...

    async def get_many(self, episode_ids: Sequence[int]) -> list[Episode]:
        """The episodes that exist among ``episode_ids``, in the order of the ids given (each once)."""
        ...

    async def list(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        """A session's episodes oldest first (created_at, then id), with the total count."""
        ...

    async def recent(self, session_id: int, limit: int) -> list[Episode]:
        """A session's newest ``limit`` episodes, newest first."""
        ...

    async def neighbours(self, episode_ids: Sequence[int], window: int) -> dict[int, Neighbours]:
        """For each existing episode of ``episode_ids``, the ids of up to ``window`` episodes on each
        side of it in its session's order (created_at, then id), nearest first. Unknown ids are left out."""
        ...


class EpisodeWrites(Protocol):
    """Synchronous writes, valid only inside ``UnitOfWork.run`` (all of a unit commits or none)."""

    def insert(self, episodes: Sequence[NewEpisode]) -> list[Episode]:
        """Insert in order. An unknown ``session_id`` raises ``NotFound`` (field ``sessionId``), a
        ``created_at`` that is not ISO-8601 raises ``Invalid`` (field ``createdAt``); either way the
        unit rolls back, so a batch is all or none. Timestamps are stored canonical (UTC, ``Z``)."""
        ...

    def update(self, episode_id: int, changes: EpisodeChanges) -> tuple[Episode, Episode] | None:
        """Apply the non-``None`` changes; returns (before, after), or ``None`` for an unknown id.
        The keyword index follows the text at once."""
        ...

    def delete(self, episode_id: int) -> bool: ...

    def delete_expired(self, now: str, limit: int) -> list[int]:
        """Delete up to ``limit`` records whose ``expires_at`` is at or before ``now`` (store format),
        oldest expiry first, with their keyword rows and stored embeddings; returns their ids.
        Enqueues nothing."""
        ...
