"""Sessions in memory."""

from __future__ import annotations

from dataclasses import replace

from adapters.memory.state import MemoryState, page_of, stored
from domain.errors import Conflict
from domain.models import Metadata, Owner, Page, Session, utc_now


class MemorySessions:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def get(self, session_id: int) -> Session | None:
        return self._s.sessions.get(session_id)

    async def by_external_id(self, external_id: str) -> Session | None:
        return next((s for s in self._s.sessions.values() if s.external_id == external_id), None)

    async def list(self, limit: int, offset: int, owner: Owner = Owner()) -> Page[Session]:
        mine = (s for s in self._s.sessions.values() if owned(s, owner))
        return page_of(sorted(mine, key=lambda s: s.id), limit, offset)


class SessionTx:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    def create(self, external_id: str, metadata: Metadata, owner: Owner = Owner()) -> Session:
        if any(s.external_id == external_id for s in self._s.sessions.values()):
            raise Conflict(f"a session with externalId {external_id!r} exists", field="externalId")
        now = utc_now()
        session = Session(self._s.next_id("sessions"), external_id, stored(metadata), now, now,
                          owner.user_id, owner.agent_id)
        self._s.sessions[session.id] = session
        return session

    def update(self, session_id: int, metadata: Metadata) -> Session | None:
        if session_id not in self._s.sessions:
            return None
        updated = replace(self._s.sessions[session_id], metadata=stored(metadata), updated_at=utc_now())
        self._s.sessions[session_id] = updated
        return updated

    def delete_owned(self, user_id: str) -> tuple[list[int], int, int]:
        ids = sorted(i for i, s in self._s.sessions.items() if s.user_id == user_id)
        episodes = sum(1 for e in self._s.episodes.values() if e.session_id in ids)
        summaries = sum(1 for s in self._s.summaries.values() if s.session_id in ids)
        for session_id in ids:
            self.delete(session_id)
        return ids, episodes, summaries

    def delete(self, session_id: int) -> bool:
        if self._s.sessions.pop(session_id, None) is None:
            return False
        for table in (self._s.episodes, self._s.summaries):  # the cascade a foreign key would do
            for item_id in [i for i, item in table.items() if item.session_id == session_id]:
                del table[item_id]
        return True


def owned(record, owner: Owner) -> bool:
    """Whether ``record`` (with ``user_id`` and, where it has one, ``agent_id``) belongs to ``owner``."""
    return (owner.user_id is None or record.user_id == owner.user_id) and (
        owner.agent_id is None or getattr(record, "agent_id", None) == owner.agent_id)
