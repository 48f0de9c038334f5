"""The record kinds that carry embedded text, declared once.

Every list of sources / vector collections and every "which loader for this kind" branch reads
this table: the worker, the index manager, search, backup and the adapters' catalogs. Adding a
kind means a ``RecordKind`` here plus that kind's files in each layer (model, port, adapters).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ports.store import Store

Source = Literal["episodes", "entities", "summaries"]


@dataclass(frozen=True, slots=True)
class RecordKind:
    name: Source
    """The kind's name: its search ``source``, its vector collection, its outbox ``collection``."""
    in_sessions: bool
    """Whether its records belong to a session (deleted with it, filtered by ``sessionId``)."""
    room: str
    """The store attribute whose port reads it (``store.<room>.get_many``)."""

    def load(self, store: Store, ids: Sequence[int]) -> Awaitable[list[Any]]:
        """The records that exist among ``ids``, in the order given."""
        return getattr(store, self.room).get_many(ids)

    @staticmethod
    def text(record: Any) -> str:
        """The text embedded for a record (each model defines ``text``)."""
        return record.text

    def payload(self, record: Any) -> dict[str, Any]:
        """The payload stored with its vector: the creation time, the session when it has one, the
        owner (user, and agent for records in sessions) and the scalar metadata (``domain.vectors``)."""
        from domain.vectors import point_payload  # vectors reads this table (COLLECTIONS)

        return point_payload(record.created_at, record.session_id if self.in_sessions else None,
                             record.user_id, getattr(record, "agent_id", None), record.metadata)


EPISODES = RecordKind("episodes", in_sessions=True, room="episodes")
ENTITIES = RecordKind("entities", in_sessions=False, room="entities")
SUMMARIES = RecordKind("summaries", in_sessions=True, room="summaries")

KINDS: dict[str, RecordKind] = {k.name: k for k in (EPISODES, ENTITIES, SUMMARIES)}
NAMES: tuple[Source, ...] = tuple(KINDS)  # type: ignore[assignment]
IN_SESSIONS: tuple[RecordKind, ...] = tuple(k for k in KINDS.values() if k.in_sessions)
