"""Summaries in memory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from adapters.memory.state import MemoryState, live, stored
from domain.errors import NotFound
from domain.models import NewSummary, Summary, SummaryChanges, merged, utc_now


class MemorySummaries:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def get(self, summary_id: int) -> Summary | None:
        found = self._s.summaries.get(summary_id)
        return found if found is not None and live(found) else None

    async def get_many(self, summary_ids: Sequence[int]) -> list[Summary]:
        return [self._s.summaries[i] for i in dict.fromkeys(summary_ids) if i in self._s.summaries
                and live(self._s.summaries[i])]

    async def list(self, session_id: int) -> list[Summary]:
        return sorted((s for s in self._s.summaries.values() if s.session_id == session_id and live(s)),
                      key=lambda s: (s.created_at, s.id))


class SummaryTx:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    def insert(self, summary: NewSummary) -> Summary:
        s = summary
        expires = s.expires_at
        if s.session_id not in self._s.sessions:
            raise NotFound(f"session {s.session_id} does not exist", field="sessionId")
        session = self._s.sessions[s.session_id]
        out = Summary(self._s.next_id("summaries"), s.session_id, s.content, s.first_episode_id,
                      s.last_episode_id, s.episode_count, s.token_count, stored(s.metadata), utc_now(),
                      session.user_id, session.agent_id, expires)
        self._s.summaries[out.id] = out
        return out

    def get(self, summary_id: int) -> Summary | None:
        return self._s.summaries.get(summary_id)

    def update(self, summary_id: int, changes: SummaryChanges) -> tuple[Summary, Summary] | None:
        old = self._s.summaries.get(summary_id)
        if old is None:
            return None
        values = merged(changes, old)
        new = replace(old, **{**values, "metadata": stored(values["metadata"])})
        self._s.summaries[summary_id] = new
        return old, new

    def delete(self, summary_id: int) -> bool:
        return self._s.summaries.pop(summary_id, None) is not None

    def delete_expired(self, now: str, limit: int) -> list[int]:
        table = self._s.summaries
        doomed = sorted((r for r in table.values() if r.expires_at is not None and r.expires_at <= now),
                        key=lambda r: (r.expires_at, r.id))[:limit]
        for record in doomed:
            self.delete(record.id)
        return [r.id for r in doomed]
