"""Episodes in memory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from adapters.memory.state import MemoryState, live, page_of, stored
from domain.errors import NotFound
from domain.models import Episode, EpisodeChanges, Neighbours, NewEpisode, Page, merged, utc_now


class MemoryEpisodes:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    def _of_session(self, session_id: int, newest_first: bool = False) -> list[Episode]:
        return sorted((e for e in self._s.episodes.values() if e.session_id == session_id and live(e)),
                      key=lambda e: (e.created_at, e.id), reverse=newest_first)

    async def get(self, episode_id: int) -> Episode | None:
        found = self._s.episodes.get(episode_id)
        return found if found is not None and live(found) else None

    async def get_many(self, episode_ids: Sequence[int]) -> list[Episode]:
        return [self._s.episodes[i] for i in dict.fromkeys(episode_ids) if i in self._s.episodes
                and live(self._s.episodes[i])]

    async def list(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        return page_of(self._of_session(session_id), limit, offset)

    async def recent(self, session_id: int, limit: int) -> list[Episode]:
        return self._of_session(session_id, newest_first=True)[:limit]

    async def neighbours(self, episode_ids: Sequence[int], window: int) -> dict[int, Neighbours]:
        if window <= 0:
            return {}
        out: dict[int, Neighbours] = {}
        for episode_id in dict.fromkeys(episode_ids):
            episode = self._s.episodes.get(episode_id)
            if episode is None:
                continue
            ordered = self._of_session(episode.session_id)
            if episode not in ordered:
                continue
            at = ordered.index(episode)
            out[episode_id] = Neighbours(before=[e.id for e in ordered[max(at - window, 0):at][::-1]],
                                         after=[e.id for e in ordered[at + 1:at + 1 + window]])
        return out


class EpisodeTx:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    def insert(self, episodes: Sequence[NewEpisode]) -> list[Episode]:
        out = []
        for new in episodes:
            if new.session_id not in self._s.sessions:
                raise NotFound(f"session {new.session_id} does not exist", field="sessionId")
            session = self._s.sessions[new.session_id]
            episode = Episode(self._s.next_id("episodes"), new.session_id, new.user_message, new.ai_response,
                              new.token_count, stored(new.metadata), new.created_at or utc_now(),
                              session.user_id, session.agent_id, new.expires_at)
            self._s.episodes[episode.id] = episode
            out.append(episode)
        return out

    def update(self, episode_id: int, changes: EpisodeChanges) -> tuple[Episode, Episode] | None:
        old = self._s.episodes.get(episode_id)
        if old is None:
            return None
        values = merged(changes, old)
        new = replace(old, **{**values, "metadata": stored(values["metadata"])})
        self._s.episodes[episode_id] = new
        return old, new

    def get(self, episode_id: int) -> Episode | None:
        return self._s.episodes.get(episode_id)

    def delete(self, episode_id: int) -> bool:
        return self._s.episodes.pop(episode_id, None) is not None

    def delete_expired(self, now: str, limit: int) -> list[int]:
        table = self._s.episodes
        doomed = sorted((r for r in table.values() if r.expires_at is not None and r.expires_at <= now),
                        key=lambda r: (r.expires_at, r.id))[:limit]
        for record in doomed:
            self.delete(record.id)
        return [r.id for r in doomed]
