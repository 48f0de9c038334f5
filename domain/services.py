"""Use cases over the memory store. Routes call exactly one of these per request.

The services own the rules a request must satisfy (non-empty names, limits in range, known
records) so every adapter and every entry point (REST, CLI, tests) gets the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from domain.errors import Invalid, NotFound
from domain.keywords import MATCH_MODES, MatchMode, plain_query
from domain.limits import (
    MAX_BATCH, MAX_COUNT, MAX_KEYWORD_QUERY, MAX_LIMIT, MAX_METADATA_DEPTH, MAX_NAME, MAX_OFFSET, MAX_TEXT,
)
from domain.models import (
    Entity, EntityChanges, Episode, EpisodeChanges, KeywordHit, Metadata, NewEntity, NewEpisode,
    NewRelationship, NewSummary, Owner, Page, Relationship, Session, Summary, SummaryChanges, Upserted,
    KEEP, check_changes, merged, utc_now,
)
from domain.listing import CursorPage, fetch_page
from domain.record_kinds import NAMES
from domain import writes
from domain.idempotency import keyed
from ports.entities import Direction
from ports.store import Store


def _given(value: Any) -> Any:
    """A change's value for the checks that take None as "nothing to check": ``KEEP`` is nothing to check."""
    return None if value is KEEP else value

def check_limit(value: int, field: str = "limit", maximum: int = MAX_LIMIT) -> int:
    if value < 1 or value > maximum:
        raise Invalid(f"{field} must be between 1 and {maximum}", field=field)
    return value


def check_offset(value: int) -> int:
    if value < 0:
        raise Invalid("offset must not be negative", field="offset")
    if value > MAX_OFFSET:
        raise Invalid(f"offset must be at most {MAX_OFFSET}", field="offset")
    return value


def check_text(value: str, field: str, *, maximum: int = MAX_TEXT, allow_empty: bool = False) -> str:
    if not allow_empty and not value.strip():
        raise Invalid(f"{field} must not be empty", field=field)
    if len(value) > maximum:
        raise Invalid(f"{field} is longer than {maximum} characters", field=field)
    if "\x00" in value:
        raise Invalid(f"{field} must not contain NUL characters", field=field)
    return value


def check_count(value: int | None, field: str) -> int | None:
    if value is not None and value < 0:
        raise Invalid(f"{field} must not be negative", field=field)
    if value is not None and value > MAX_COUNT:
        raise Invalid(f"{field} must be at most {MAX_COUNT}", field=field)
    return value


def check_metadata(value: Metadata | None, field: str = "metadata") -> Metadata | None:
    """``value`` when it nests at most ``MAX_METADATA_DEPTH`` objects/arrays deep (measured
    without recursion, so no depth can crash the check itself)."""
    stack = [(value, 1)] if value is not None else []
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, Mapping) else item if isinstance(item, (list, tuple)) else None
        if children is None:
            continue
        if depth > MAX_METADATA_DEPTH:
            raise Invalid(f"{field} nests deeper than {MAX_METADATA_DEPTH} levels", field=field)
        stack.extend((child, depth + 1) for child in children)
    return value


def check_owner(owner: Owner) -> Owner:
    """A user or agent id is a non-empty name (``''`` stands for "nobody" in the entity key)."""
    for field, value in (("userId", owner.user_id), ("agentId", owner.agent_id)):
        if value is not None:
            check_text(value, field, maximum=MAX_NAME)
    return owner


def check_session_owner(session: Session, owner: Owner) -> Session:
    """A session named together with an owner must be theirs (its owner is fixed at creation):
    ``Invalid`` naming ``userId``/``agentId`` otherwise, never a silent read or write of another's."""
    for field, wanted, has in (("userId", owner.user_id, session.user_id),
                               ("agentId", owner.agent_id, session.agent_id)):
        if wanted is not None and wanted != has:
            raise Invalid(f"session {session.id} does not belong to {field} {wanted!r}", field=field)
    return session


def _found(item, what: str, item_id: int | str):
    if item is None:
        raise NotFound(f"{what} {item_id} does not exist")
    return item


async def _write(store: Store, fn):
    """Run the write ``fn`` as one unit of work; a request's idempotency key, when it has one, is
    stored with it (``domain.idempotency.keyed``). ``fn`` returns what the service answers (a
    missing record raises inside the unit, which wrote nothing), so the answer stored with the
    write is the one the caller is sent."""
    return await store.uow.run(keyed(fn))


class SessionService:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def create(self, external_id: str, metadata: Metadata, owner: Owner = Owner()) -> Session:
        check_metadata(metadata)
        check_text(external_id, "externalId", maximum=MAX_NAME)  # here, not on the writer thread
        check_owner(owner)
        return await _write(self._store, lambda tx: writes.create_session(tx, external_id, metadata, owner))

    async def get(self, session_id: int) -> Session:
        return _found(await self._store.sessions.get(session_id), "session", session_id)

    async def by_external_id(self, external_id: str) -> Session:
        return _found(await self._store.sessions.by_external_id(external_id), "session", repr(external_id))

    async def list(self, limit: int, offset: int, owner: Owner = Owner()) -> Page[Session]:
        return await self._store.sessions.list(check_limit(limit), check_offset(offset), check_owner(owner))

    async def listed(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                     offset: int | None = None, owner: Owner = Owner()) -> CursorPage[Session]:
        """Keyset list (``domain.listing``): ``filter`` is the JSON text of a metadata filter. The seed's
        ``offset`` pages are ``list``; one request cannot mix the two."""
        if offset is not None:
            raise Invalid("offset cannot be combined with cursor, order or filter (a cursor page continues "
                          "from nextCursor)", field="offset")
        check_owner(owner)
        return await fetch_page("sessions", self._store.listing.sessions, limit=limit, order=order, cursor=cursor,
                                filter=filter, user_id=owner.user_id, agent_id=owner.agent_id)

    async def update(self, session_id: int, metadata: Metadata) -> Session:
        check_metadata(metadata)
        return await _write(self._store, lambda tx: _found(writes.update_session(tx, session_id, metadata), "session",
                                                           session_id))

    async def delete(self, session_id: int) -> None:
        await _write(self._store, lambda tx: _found(writes.delete_session(tx, session_id) or None, "session", session_id))


class EpisodeService:
    def __init__(self, store: Store) -> None:
        self._store = store

    @staticmethod
    def _checked(new: NewEpisode) -> NewEpisode:
        check_text(new.user_message, "userMessage", allow_empty=True)
        check_text(new.ai_response, "aiResponse", allow_empty=True)
        if not (new.user_message.strip() or new.ai_response.strip()):
            raise Invalid("userMessage and aiResponse must not both be empty", field="userMessage")
        check_count(new.token_count, "tokenCount")
        check_metadata(new.metadata)
        return new

    async def add(self, new: NewEpisode) -> Episode:
        checked = self._checked(new)
        return await _write(self._store, lambda tx: writes.add_episodes(tx, [checked])[0])

    async def add_batch(self, batch: Sequence[NewEpisode]) -> list[Episode]:
        if not batch:
            raise Invalid("episodes must not be empty", field="episodes")
        if len(batch) > MAX_BATCH:
            raise Invalid(f"at most {MAX_BATCH} episodes per batch", field="episodes")
        checked = [self._checked(e) for e in batch]
        return await _write(self._store, lambda tx: writes.add_episodes(tx, checked))

    async def get(self, episode_id: int) -> Episode:
        return _found(await self._store.episodes.get(episode_id), "episode", episode_id)

    async def update(self, episode_id: int, changes: EpisodeChanges) -> Episode:
        check_changes(changes)
        for field, value in (("userMessage", changes.user_message), ("aiResponse", changes.ai_response)):
            if value is not KEEP:
                check_text(value, field, allow_empty=True)
        check_count(_given(changes.token_count), "tokenCount")
        check_metadata(_given(changes.metadata))
        if changes.user_message is not KEEP or changes.ai_response is not KEEP:
            # The rule of add: the episode that results must say something on one side at least.
            current = _found(await self._store.episodes.get(episode_id), "episode", episode_id)
            new = merged(changes, current)
            user, ai = new["user_message"], new["ai_response"]
            if not (user.strip() or ai.strip()):
                raise Invalid("userMessage and aiResponse must not both be empty", field="userMessage")
        return await _write(self._store, lambda tx: _found(writes.update_episode(tx, episode_id, changes), "episode",
                                                           episode_id))

    async def delete(self, episode_id: int) -> None:
        await _write(self._store, lambda tx: _found(writes.delete_episode(tx, episode_id) or None, "episode", episode_id))

    async def of_session(self, session_id: int, limit: int, offset: int) -> Page[Episode]:
        check_limit(limit)
        check_offset(offset)
        _found(await self._store.sessions.get(session_id), "session", session_id)
        return await self._store.episodes.list(session_id, limit, offset)

    async def listed(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                     session_id: int | None = None, owner: Owner = Owner()) -> CursorPage[Episode]:
        check_owner(owner)
        return await fetch_page("episodes", self._store.listing.episodes, limit=limit, order=order, cursor=cursor,
                                filter=filter, session_id=session_id, user_id=owner.user_id, agent_id=owner.agent_id)

    async def search(
        self, q: str, limit: int, session_id: int | None = None, match: str = "all", owner: Owner = Owner(),
        global_records: bool = False,
    ) -> list[KeywordHit[Episode]]:
        """Keyword search: plain words by default (``all`` of them, or ``any``); ``fts`` is raw FTS5.
        ``owner`` and ``global_records`` narrow it as ``KeywordIndex.search`` says."""
        check_text(q, "q", maximum=MAX_KEYWORD_QUERY)
        check_limit(limit)
        if match not in MATCH_MODES:
            raise Invalid(f"match must be one of {', '.join(MATCH_MODES)}", field="match")
        mode: MatchMode = match  # type: ignore[assignment]
        return await self._store.keywords.search("episodes", plain_query(q, mode), limit, session_id=session_id,
                                                 owner=owner, global_records=global_records)


class EntityService:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def upsert(self, new: NewEntity) -> Upserted[Entity]:
        check_text(new.name, "name", maximum=MAX_NAME)
        check_text(new.type, "type", maximum=MAX_NAME)
        check_owner(Owner(new.user_id))
        if new.notes is not None:
            check_text(new.notes, "notes", allow_empty=True)
        check_metadata(new.metadata)
        return await _write(self._store, lambda tx: writes.upsert_entity(tx, new))

    async def get(self, entity_id: int) -> Entity:
        return _found(await self._store.entities.get(entity_id), "entity", entity_id)

    async def update(self, entity_id: int, changes: EntityChanges) -> Entity:
        check_changes(changes)
        for field, value in (("name", changes.name), ("type", changes.type)):
            if value is not KEEP:
                check_text(value, field, maximum=MAX_NAME)
        if _given(changes.notes) is not None:
            check_text(changes.notes, "notes", allow_empty=True)
        check_metadata(_given(changes.metadata))
        return await _write(self._store, lambda tx: _found(writes.update_entity(tx, entity_id, changes), "entity",
                                                           entity_id))

    async def listed(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                     type: str | None = None, user_id: str | None = None) -> CursorPage[Entity]:
        if type is not None:
            check_text(type, "type", maximum=MAX_NAME)
        check_owner(Owner(user_id))
        return await fetch_page("entities", self._store.listing.entities, limit=limit, order=order, cursor=cursor,
                                filter=filter, type=type, user_id=user_id)

    async def listed_relationships(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                                   entity_id: int | None = None, label: str | None = None,
                                   user_id: str | None = None, as_of: str | None = None) -> CursorPage[Relationship]:
        if label is not None:
            check_text(label, "label", maximum=MAX_NAME)
        check_owner(Owner(user_id))
        return await fetch_page("relationships", self._store.listing.relationships, limit=limit, order=order,
                                cursor=cursor, filter=filter, entity_id=entity_id, label=label, user_id=user_id,
                                as_of=as_of)

    async def by_type(self, entity_type: str, limit: int, offset: int, user_id: str | None = None,
                      global_records: bool = True) -> Page[Entity]:
        """``user_id``: that user's entities, and the global ones unless ``global_records`` is False."""
        return await self._store.entities.by_type(entity_type, check_limit(limit), check_offset(offset), user_id,
                                                  global_records)

    async def find_by_name(self, name: str, limit: int, user_id: str | None = None,
                           global_records: bool = True) -> list[Entity]:
        return await self._store.entities.find_by_name(check_text(name, "name", maximum=MAX_NAME), check_limit(limit),
                                                       user_id, global_records)

    async def delete(self, entity_id: int) -> None:
        await _write(self._store, lambda tx: _found(writes.delete_entity(tx, entity_id) or None, "entity", entity_id))

    async def relate(self, new: NewRelationship) -> Upserted[Relationship]:
        check_text(new.label, "label", maximum=MAX_NAME)
        check_owner(Owner(new.user_id))
        check_metadata(new.metadata)
        return await _write(self._store, lambda tx: writes.relate(tx, new))

    async def relationships(self, entity_id: int, direction: Direction = "out",
                            as_of: str | None = None) -> list[Relationship]:
        """All of an entity's edges (open and closed), or with ``as_of`` those valid at that moment."""
        if direction not in ("out", "in", "both"):
            raise Invalid("direction must be out, in or both", field="direction")
        _found(await self._store.entities.get(entity_id), "entity", entity_id)
        return await self._store.entities.relationships_of(entity_id, direction, as_of)

    async def unrelate(self, from_id: int, to_id: int, label: str, user_id: str | None = None) -> None:
        """Delete the relationship's edges: with ``user_id`` that user's, else every owner's."""
        check_owner(Owner(user_id))

        def unit(tx) -> bool:
            if not writes.unrelate(tx, from_id, to_id, label, user_id):
                raise NotFound(f"relationship {from_id} -[{label}]-> {to_id} does not exist")
            return True

        await _write(self._store, unit)


class SummaryService:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def add(self, new: NewSummary) -> Summary:
        check_text(new.content, "content")
        check_count(new.token_count, "tokenCount")
        check_count(new.episode_count, "episodeCount")
        check_metadata(new.metadata)
        return await _write(self._store, lambda tx: writes.add_summary(tx, new))

    async def get(self, summary_id: int) -> Summary:
        return _found(await self._store.summaries.get(summary_id), "summary", summary_id)

    async def update(self, summary_id: int, changes: SummaryChanges) -> Summary:
        check_changes(changes)
        if changes.content is not KEEP:
            check_text(changes.content, "content")
        check_count(_given(changes.token_count), "tokenCount")
        check_count(_given(changes.episode_count), "episodeCount")
        check_metadata(_given(changes.metadata))
        return await _write(self._store, lambda tx: _found(writes.update_summary(tx, summary_id, changes), "summary",
                                                           summary_id))

    async def listed(self, *, limit: int, order: str, cursor: str | None, filter: str | None,
                     session_id: int | None = None, owner: Owner = Owner()) -> CursorPage[Summary]:
        check_owner(owner)
        return await fetch_page("summaries", self._store.listing.summaries, limit=limit, order=order, cursor=cursor,
                                filter=filter, session_id=session_id, user_id=owner.user_id, agent_id=owner.agent_id)

    async def of_session(self, session_id: int) -> list[Summary]:
        _found(await self._store.sessions.get(session_id), "session", session_id)
        return await self._store.summaries.list(session_id)

    async def delete(self, summary_id: int) -> None:
        await _write(self._store, lambda tx: _found(writes.delete_summary(tx, summary_id) or None, "summary",
                                                    summary_id))


class UserService:
    """What a user owns, as a whole: forgetting them."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def forget(self, user_id: str) -> dict[str, int]:
        """Delete everything ``user_id`` owns in one unit of work and answer the counts per kind.
        An unknown user answers zeros (like mem0's ``delete_all``): forgetting is idempotent, so a
        retried request after a lost answer succeeds instead of reading as an error."""
        check_owner(Owner(user_id))
        return await _write(self._store, lambda tx: writes.forget_user(tx, user_id))


class ExpiryService:
    """Purges expired episodes, entities and summaries (reads already hide them)."""

    BATCH = 500  # records per kind per unit of work: a long purge never holds the writer for long

    def __init__(self, store: Store) -> None:
        self._store = store

    async def purge(self, now: str | None = None) -> dict[str, int]:
        """Delete every record expired by ``now`` (default: the present), batch by batch; answers
        how many of each kind went."""
        moment, total = now or utc_now(), dict.fromkeys(NAMES, 0)
        while True:
            purged = await self._store.uow.run(lambda tx: writes.purge_expired(tx, moment, self.BATCH))
            for kind, n in purged.items():
                total[kind] += n
            if max(purged.values()) < self.BATCH:
                await self.purge_keys(moment)
                return total

    async def purge_keys(self, now: str | None = None) -> int:
        """Delete every idempotency key expired by ``now`` (``domain.idempotency``), batch by batch;
        answers how many went. Reads already ignore them; this reclaims the space."""
        moment, total = now or utc_now(), 0
        while True:
            gone = await self._store.uow.run(lambda tx: writes.purge_expired_keys(tx, moment, self.BATCH))
            total += gone
            if gone < self.BATCH:
                return total
