"""Record history: the versions of episodes, entities, relationships and summaries (``domain.changes``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from domain.changes import HistoryOp, Version


class History(Protocol):
    async def of_record(self, kind: str, record_id: int, after: int, limit: int) -> list[Version]:
        """The versions of one record with ``version > after``, oldest first, at most ``limit``.
        Works after the record is deleted; an unknown record has none."""
        ...


class HistoryWrites(Protocol):
    """Synchronous, valid only inside ``UnitOfWork.run``: a version commits with its change."""

    def append(self, kind: str, record_id: int, op: HistoryOp, at: str, actor: str | None,
               before: dict | None, after: dict | None, changed: Sequence[str],
               session_id: int | None, user_id: str | None) -> int:
        """Append one version; returns its number (greater than every earlier one)."""
        ...

    def forget_records(self, kind: str, record_ids: Sequence[int]) -> int:
        """Delete every version of those records; returns how many."""
        ...

    def forget_session(self, session_id: int) -> int:
        """Delete every version of the records that belonged to the session; returns how many."""
        ...

    def forget_user(self, user_id: str) -> int:
        """Delete every version of the records the user owned; returns how many."""
        ...
