"""Summaries: condensed spans of a session's episodes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from domain.models import NewSummary, Summary, SummaryChanges


class Summaries(Protocol):
    async def get(self, summary_id: int) -> Summary | None: ...

    async def get_many(self, summary_ids: Sequence[int]) -> list[Summary]:
        """The summaries that exist among ``summary_ids``, in the order given (each once)."""
        ...

    async def list(self, session_id: int) -> list[Summary]:
        """A session's summaries oldest first (created_at, then id)."""
        ...


class SummaryWrites(Protocol):
    """Synchronous writes, valid only inside ``UnitOfWork.run``."""

    def insert(self, summary: NewSummary) -> Summary:
        """Insert; an unknown session raises ``NotFound`` (field ``sessionId``)."""
        ...

    def update(self, summary_id: int, changes: SummaryChanges) -> tuple[Summary, Summary] | None:
        """Apply the non-``None`` changes; returns (before, after), or ``None`` for an unknown id.
        The keyword index follows the content at once."""
        ...

    def delete(self, summary_id: int) -> bool: ...

    def delete_expired(self, now: str, limit: int) -> list[int]:
        """Delete up to ``limit`` records whose ``expires_at`` is at or before ``now`` (store format),
        oldest expiry first, with their keyword rows and stored embeddings; returns their ids.
        Enqueues nothing."""
        ...
