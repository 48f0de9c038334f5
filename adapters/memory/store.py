"""``InMemoryMemoryStore``: the memory store in plain dicts, a supported test double.

Same contract as the SQLite store (the contract suite runs over both): cascades, uniqueness,
upserts, pagination order and the outbox. Keyword search matches whole words case-insensitively
and scores by term frequency; it does not stem, and reads FTS syntax as plain terms.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from domain.errors import Conflict, Invalid, NotFound
from domain.keywords import KeywordQuery
from domain.models import (
    Entity, Episode, EpisodeChanges, KeywordHit, Metadata, Neighbours, NewEntity, NewEpisode,
    NewRelationship, NewSummary, Page, Relationship, Session, Summary, Upserted, format_timestamp, parse_timestamp, utc_now,
)
from domain.outbox import Backlog, OutboxJob
from ports.memory_store import Direction, Source


_WORD = re.compile(r"\w+", re.UNICODE)


def _stored(metadata: Metadata) -> dict:
    """Metadata as a real store keeps it: by value (later changes by the caller do not leak in),
    JSON-shaped (tuples become lists, keys strings), and refused if JSON cannot hold it."""
    return json.loads(json.dumps(metadata or {}))


def _canonical(text: str | None) -> str:
    if text is None:
        return utc_now()
    try:
        return format_timestamp(parse_timestamp(text))
    except ValueError:
        raise Invalid(f"createdAt {text!r} is not an ISO-8601 timestamp", field="createdAt") from None


class InMemoryMemoryStore:
    supports_fts_syntax = False

    def __init__(self) -> None:
        self.sessions: dict[int, Session] = {}
        self.episodes: dict[int, Episode] = {}
        self.entities: dict[int, Entity] = {}
        self.relationships: dict[int, Relationship] = {}
        self.summaries: dict[int, Summary] = {}
        self.outbox: dict[int, OutboxJob] = {}
        self._retry_at: dict[int, str] = {}
        self._ids = {name: itertools.count(1) for name in
                     ("sessions", "episodes", "entities", "relationships", "summaries", "outbox")}

    def _enqueue(self, collection: str, op: str, ref_id: int) -> None:
        job_id = next(self._ids["outbox"])
        now = utc_now()
        self.outbox[job_id] = OutboxJob(job_id, collection, op, ref_id, 0, now)  # type: ignore[arg-type]
        self._retry_at[job_id] = now

    # -- sessions ------------------------------------------------------------------------------
    async def create_session(self, external_id: str, metadata: Metadata) -> Session:
        if any(s.external_id == external_id for s in self.sessions.values()):
            raise Conflict(f"a session with externalId {external_id!r} exists", field="externalId")
        now = utc_now()
        session = Session(next(self._ids["sessions"]), external_id, _stored(metadata), now, now)
        self.sessions[session.id] = session
        return session

    async def get_session(self, session_id: int) -> Session | None:
        return self.sessions.get(session_id)

    async def get_session_by_external_id(self, external_id: str) -> Session | None:
        return next((s for s in self.sessions.values() if s.external_id == external_id), None)

    async def list_sessions(self, limit: int, offset: int) -> Page[Session]:
        ordered = sorted(self.sessions.values(), key=lambda s: s.id)
        return Page(ordered[offset:offset + limit], len(ordered), limit, offset)

    async def update_session(self, session_id: int, metadata: Metadata) -> Session | None:
        if session_id not in self.sessions:
            return None
        updated = replace(self.sessions[session_id], metadata=_stored(metadata), updated_at=utc_now())
        self.sessions[session_id] = updated
        return updated

    async def delete_session(self, session_id: int) -> bool:
        if self.sessions.pop(session_id, None) is None:
            return False
        for table in (self.episodes, self.summaries):
            for item_id in [i for i, item in table.items() if item.session_id == session_id]:
                del table[item_id]
        self._enqueue("episodes", "delete_session", session_id)
        self._enqueue("summaries", "delete_session", session_id)
        return True

    # -- episodes ------------------------------------------------------------------------------
    async def add_episodes(self, episodes: Sequence[NewEpisode]) -> list[Episode]:
        for new in episodes:
            if new.session_id not in self.sessions:
                raise NotFound(f"session {new.session_id} does not exist", field="sessionId")
        # Everything is checked before anything is stored: the batch is all or none.
        prepared = [(new, _canonical(new.created_at), _stored(new.metadata)) for new in episodes]
        stored = []
        for new, created_at, metadata in prepared:
            episode = Episode(next(self._ids["episodes"]), new.session_id, new.user_message, new.ai_response,
                              new.token_count, metadata, created_at)
            self.episodes[episode.id] = episode
            self._enqueue("episodes", "upsert", episode.id)
            stored.append(episode)
        return stored

    async def get_episode(self, episode_id: int) -> Episode | None:
        return self.episodes.get(episode_id)

    async def get_episodes(self, episode_ids: Sequence[int]) -> list[Episode]:
        return [self.episodes[i] for i in dict.fromkeys(episode_ids) if i in self.episodes]

    async def update_episode(self, episode_id: int, changes: EpisodeChanges) -> Episode | None:
        old = self.episodes.get(episode_id)
        if old is None:
            return None
        new = replace(
            old,
            user_message=old.user_message if changes.user_message is None else changes.user_message,
            ai_response=old.ai_response if changes.ai_response is None else changes.ai_response,
            token_count=old.token_count if changes.token_count is None else changes.token_count,
            metadata=old.metadata if changes.metadata is None else _stored(changes.metadata),
        )
        self.episodes[episode_id] = new
        if (new.user_message, new.ai_response) != (old.user_message, old.ai_response):
            self._enqueue("episodes", "upsert", episode_id)
        return new

    async def delete_episode(self, episode_id: int) -> bool:
        return self._delete_embedded(self.episodes, "episodes", episode_id)

    async def list_episodes(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        ordered = sorted((e for e in self.episodes.values() if e.session_id == session_id),
                         key=lambda e: (e.created_at, e.id))
        return Page(ordered[offset:offset + limit], len(ordered), limit, offset)

    async def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        ordered = sorted((e for e in self.episodes.values() if e.session_id == session_id),
                         key=lambda e: (e.created_at, e.id), reverse=True)
        return ordered[:limit]

    async def episode_neighbours(self, episode_ids: Sequence[int], window: int) -> dict[int, Neighbours]:
        if window <= 0:
            return {}
        out: dict[int, Neighbours] = {}
        for episode_id in dict.fromkeys(episode_ids):
            episode = self.episodes.get(episode_id)
            if episode is None:
                continue
            ordered = sorted((e for e in self.episodes.values() if e.session_id == episode.session_id),
                             key=lambda e: (e.created_at, e.id))
            at = ordered.index(episode)
            out[episode_id] = Neighbours(before=[e.id for e in ordered[max(at - window, 0):at][::-1]],
                                         after=[e.id for e in ordered[at + 1:at + 1 + window]])
        return out

    # -- keyword search ------------------------------------------------------------------------
    async def keyword_search(
        self, source: Source, query: KeywordQuery, limit: int, session_id: int | None = None,
        since: datetime | None = None, until: datetime | None = None,
    ) -> list[KeywordHit]:
        if query.is_empty or limit <= 0 or not query.terms:
            return []
        table = {"episodes": self.episodes, "entities": self.entities, "summaries": self.summaries}[source]
        lo = format_timestamp(since) if since else None
        hi = format_timestamp(until) if until else None
        hits = []
        for item in table.values():
            if session_id is not None and source != "entities" and item.session_id != session_id:
                continue
            if (lo and item.created_at < lo) or (hi and item.created_at > hi):
                continue
            # Every word counts, repeats included: term frequency is what orders the hits.
            words = Counter(_WORD.findall(_searchable(item).casefold()))
            counts = {t: words[t] for t in query.terms}
            matched = [t for t, n in counts.items() if n]
            if not matched or (query.mode != "any" and len(matched) < len(query.terms)):
                continue
            hits.append(KeywordHit(item, float(len(matched)) + 0.01 * sum(counts.values())))
        hits.sort(key=lambda h: (-h.score, h.item.id))
        return hits[:limit]

    # -- entities and relationships ------------------------------------------------------------
    async def upsert_entity(self, entity: NewEntity) -> Upserted[Entity]:
        now = utc_now()
        old = next((e for e in self.entities.values() if (e.name, e.type) == (entity.name, entity.type)), None)
        if old is None:
            stored = Entity(next(self._ids["entities"]), entity.name, entity.type, entity.notes,
                            _stored(entity.metadata), now, now)
        else:
            stored = replace(old, notes=entity.notes, metadata=_stored(entity.metadata), updated_at=now)
        self.entities[stored.id] = stored
        self._enqueue("entities", "upsert", stored.id)
        return Upserted(stored, old is None)

    async def get_entity(self, entity_id: int) -> Entity | None:
        return self.entities.get(entity_id)

    async def get_entities(self, entity_ids: Sequence[int]) -> list[Entity]:
        return [self.entities[i] for i in dict.fromkeys(entity_ids) if i in self.entities]

    async def list_entities_by_type(self, entity_type: str, limit: int, offset: int) -> Page[Entity]:
        ordered = sorted((e for e in self.entities.values() if e.type == entity_type), key=lambda e: (e.name, e.id))
        return Page(ordered[offset:offset + limit], len(ordered), limit, offset)

    async def find_entities_by_name(self, name: str, limit: int) -> list[Entity]:
        needle = name.casefold()
        found = [e for e in self.entities.values() if needle in e.name.casefold()]
        found.sort(key=lambda e: (e.name.casefold() != needle, e.name, e.id))
        return found[:limit]

    async def entities_mentioned_in(self, texts: Sequence[str], limit: int) -> list[Entity]:
        haystack = "\n".join(texts).casefold()
        found = [e for e in sorted(self.entities.values(), key=lambda e: e.id)
                 if e.name and re.search(rf"(?<!\w){re.escape(e.name.casefold())}(?!\w)", haystack)]
        return found[:limit]

    async def delete_entity(self, entity_id: int) -> bool:
        if not self._delete_embedded(self.entities, "entities", entity_id):
            return False
        for rel_id in [i for i, r in self.relationships.items() if entity_id in (r.from_id, r.to_id)]:
            del self.relationships[rel_id]
        return True

    async def upsert_relationship(self, relationship: NewRelationship) -> Upserted[Relationship]:
        r = relationship
        for field, entity_id in (("fromId", r.from_id), ("toId", r.to_id)):
            if entity_id not in self.entities:
                raise NotFound(f"entity {entity_id} does not exist", field=field)
        old = next((x for x in self.relationships.values()
                    if (x.from_id, x.to_id, x.label) == (r.from_id, r.to_id, r.label)), None)
        if old is None:
            stored = Relationship(next(self._ids["relationships"]), r.from_id, r.to_id, r.label,
                                  _stored(r.metadata), utc_now())
        else:
            stored = replace(old, metadata=_stored(r.metadata))
        self.relationships[stored.id] = stored
        return Upserted(stored, old is None)

    async def relationships_of(self, entity_id: int, direction: Direction) -> list[Relationship]:
        def wanted(r: Relationship) -> bool:
            return (direction in ("out", "both") and r.from_id == entity_id) or (
                direction in ("in", "both") and r.to_id == entity_id)

        return sorted(filter(wanted, self.relationships.values()), key=lambda r: (r.created_at, r.id))

    async def delete_relationship(self, from_id: int, to_id: int, label: str) -> bool:
        for rel_id, r in list(self.relationships.items()):
            if (r.from_id, r.to_id, r.label) == (from_id, to_id, label):
                del self.relationships[rel_id]
                return True
        return False

    # -- summaries -----------------------------------------------------------------------------
    async def add_summary(self, summary: NewSummary) -> Summary:
        s = summary
        if s.session_id not in self.sessions:
            raise NotFound(f"session {s.session_id} does not exist", field="sessionId")
        stored = Summary(next(self._ids["summaries"]), s.session_id, s.content, s.first_episode_id,
                         s.last_episode_id, s.episode_count, s.token_count, _stored(s.metadata), utc_now())
        self.summaries[stored.id] = stored
        self._enqueue("summaries", "upsert", stored.id)
        return stored

    async def get_summary(self, summary_id: int) -> Summary | None:
        return self.summaries.get(summary_id)

    async def get_summaries(self, summary_ids: Sequence[int]) -> list[Summary]:
        return [self.summaries[i] for i in dict.fromkeys(summary_ids) if i in self.summaries]

    async def list_summaries(self, session_id: int) -> list[Summary]:
        return sorted((s for s in self.summaries.values() if s.session_id == session_id),
                      key=lambda s: (s.created_at, s.id))

    async def delete_summary(self, summary_id: int) -> bool:
        return self._delete_embedded(self.summaries, "summaries", summary_id)

    # -- embedding outbox ----------------------------------------------------------------------
    async def due_jobs(self, limit: int, now: datetime) -> list[OutboxJob]:
        cutoff = format_timestamp(now)
        return [job for job_id, job in sorted(self.outbox.items())
                if self._retry_at[job_id] <= cutoff and job.dead_at is None][:limit]

    async def complete_jobs(self, job_ids: Sequence[int]) -> None:
        for job_id in job_ids:
            self.outbox.pop(job_id, None)
            self._retry_at.pop(job_id, None)

    async def defer_jobs(self, job_ids: Sequence[int], error: str, retry_at: datetime) -> None:
        for job_id in job_ids:
            if job_id in self.outbox:
                job = self.outbox[job_id]
                self.outbox[job_id] = replace(job, attempts=job.attempts + 1, last_error=error[:500])
                self._retry_at[job_id] = format_timestamp(retry_at)

    async def bury_jobs(self, job_ids: Sequence[int], error: str) -> None:
        now = utc_now()
        for job_id in job_ids:
            if job_id in self.outbox:
                job = self.outbox[job_id]
                self.outbox[job_id] = replace(job, attempts=job.attempts + 1, last_error=error[:500], dead_at=now)

    async def dead_jobs(self, limit: int) -> list[OutboxJob]:
        return [job for _id, job in sorted(self.outbox.items()) if job.dead_at is not None][:limit]

    async def retry_dead_jobs(self, job_ids: Sequence[int] | None = None) -> int:
        wanted = set(self.outbox) if job_ids is None else set(job_ids)
        revived = 0
        for job_id in sorted(wanted & set(self.outbox)):
            job = self.outbox[job_id]
            if job.dead_at is not None:
                self.outbox[job_id] = replace(job, attempts=0, dead_at=None)
                self._retry_at[job_id] = utc_now()
                revived += 1
        return revived

    async def backlog(self) -> Backlog:
        everything = sorted(self.outbox.values(), key=lambda j: j.id)
        jobs = [j for j in everything if j.dead_at is None]
        errors = [j.last_error for j in everything if j.last_error]
        return Backlog(len(jobs), min((j.created_at for j in jobs), default=None),
                       errors[-1] if errors else None, sum(1 for j in jobs if j.attempts > 0),
                       len(everything) - len(jobs))

    async def enqueue_reindex(self, collection: Source) -> int:
        table = {"episodes": self.episodes, "entities": self.entities, "summaries": self.summaries}[collection]
        for item_id in sorted(table):
            self._enqueue(collection, "upsert", item_id)
        return len(table)

    # -- operations ----------------------------------------------------------------------------
    async def counts(self) -> dict[str, int]:
        return {"sessions": len(self.sessions), "episodes": len(self.episodes), "entities": len(self.entities),
                "relationships": len(self.relationships), "summaries": len(self.summaries),
                "embedding_outbox": len(self.outbox)}

    async def sizes(self) -> dict[str, int]:
        return {}

    async def health(self) -> str | None:
        return None

    async def close(self) -> None:
        return None

    def _delete_embedded(self, table: dict, collection: str, item_id: int) -> bool:
        if table.pop(item_id, None) is None:
            return False
        self._enqueue(collection, "delete", item_id)
        return True


def _searchable(item: object) -> str:
    if isinstance(item, Episode):
        return f"{item.user_message}\n{item.ai_response}"
    if isinstance(item, Entity):
        return f"{item.name}\n{item.type}\n{item.notes or ''}"
    return item.content  # type: ignore[attr-defined]
