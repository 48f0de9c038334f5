"""Sessions: the conversations every episode and summary belongs to.

Reads are the ``Sessions`` port; writes happen inside a unit of work (``SessionWrites``, reached
as ``tx.sessions``), so a session's removal and the vector jobs it implies commit together.
"""

from __future__ import annotations

from typing import Protocol

from domain.models import Metadata, Owner, Page, Session


class Sessions(Protocol):
    """Ids are positive integers assigned by the store, never reused; an unknown id reads ``None``."""

    async def get(self, session_id: int) -> Session | None: ...

    async def by_external_id(self, external_id: str) -> Session | None: ...

    async def list(self, limit: int, offset: int, owner: Owner = Owner()) -> Page[Session]:
        """Sessions oldest first (by id), at most ``limit`` from ``offset``, with the total count;
        with an ``owner``, only the sessions whose ``user_id`` / ``agent_id`` equal the ones given."""
        ...


class SessionWrites(Protocol):
    """Synchronous writes, valid only inside ``UnitOfWork.run``."""

    def create(self, external_id: str, metadata: Metadata, owner: Owner = Owner()) -> Session:
        """Create a session owned by ``owner`` (its user and agent, either may be ``None``; they never
        change afterwards); an ``external_id`` already in use raises ``Conflict`` (field ``externalId``)."""
        ...

    def update(self, session_id: int, metadata: Metadata) -> Session | None:
        """Replace the metadata and bump ``updated_at`` (the owner stays); an unknown id returns ``None``."""
        ...

    def delete_owned(self, user_id: str) -> tuple[list[int], int, int]:
        """Delete every session of ``user_id`` with its episodes and summaries (and their keyword
        index rows and stored embeddings); returns (the session ids, episodes deleted, summaries
        deleted). Enqueues nothing."""
        ...

    def delete(self, session_id: int) -> bool:
        """Delete the session with its episodes and summaries (cascade); ``False`` when unknown.
        Enqueues nothing: the vector jobs are the domain's rule (``domain.writes``)."""
        ...
