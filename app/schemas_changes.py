"""Wire schemas of what changes: PATCH bodies (JSON Merge Patch) of episodes, entities and summaries, a record's versions (history), the change feed's events, and what forgetting a user removed."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from app.schemas import Body, Camel, Count, Id, Meta, Name, Text


class VersionOut(Camel):
    """One version of a record: ``before``/``after`` are the record's fields (``after`` null when
    deleted), ``changed`` the fields that differ, ``actor`` the request's ``X-Actor``."""
    version: int
    kind: str
    record_id: int
    op: str
    at: str
    actor: str | None
    before: Meta | None
    after: Meta | None
    changed: list[str]
    session_id: int | None = None
    user_id: str | None = None


class HistoryOut(Camel):
    items: list[VersionOut]
    next_after: int | None


class EventOut(Camel):
    seq: int
    kind: str
    record_id: int
    op: str
    at: str
    session_id: int | None = None
    user_id: str | None = None


class EventsOut(Camel):
    events: list[EventOut]
    next_after: int
    truncated: bool



def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _image(value: dict | None) -> dict | None:
    """A stored record image with its field names as the wire spells them (metadata untouched)."""
    return None if value is None else {_camel(k): v for k, v in value.items()}


def history_out(page: Any) -> HistoryOut:
    return HistoryOut(items=[VersionOut(
        version=v.version, kind=v.kind, record_id=v.record_id, op=v.op, at=v.at, actor=v.actor,
        before=_image(v.before), after=_image(v.after), changed=[_camel(c) for c in v.changed],
        session_id=v.session_id, user_id=v.user_id) for v in page.items], next_after=page.next_after)


class ForgottenOut(Camel):
    """How many records of each kind ``DELETE /users/:userId`` removed."""
    sessions: int
    episodes: int
    summaries: int
    entities: int
    relationships: int
    history: int  # versions of those records' history, forgotten with them


# -- PATCH bodies -----------------------------------------------------------------------------------
# PATCH bodies follow JSON Merge Patch (RFC 7396): a field left out stays as it is, ``null`` clears a
# nullable field, and ``null`` on a required one is a 400 naming it (its type has no null).
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET


class UpdateEpisode(Body):
    user_message: Text | Unset = UNSET
    ai_response: Text | Unset = UNSET
    token_count: Count | None | Unset = UNSET
    metadata: Meta | Unset = UNSET


C = TypeVar("C")


def changes_of(data: Body, changes: type[C]) -> C:
    """A PATCH body as the domain's partial update: the fields given (``None`` included), the rest ``KEEP``."""
    return changes(**{name: value for name in data.__struct_fields__
                      if (value := getattr(data, name)) is not UNSET})


# JSON Merge Patch, as UpdateEpisode: left out = unchanged, null clears a nullable field (notes, the
# episode ids, tokenCount), null on a required one is a 400.
class UpdateEntity(Body):
    name: Name | Unset = UNSET
    type: Name | Unset = UNSET
    notes: Text | None | Unset = UNSET
    metadata: Meta | Unset = UNSET


class UpdateSummary(Body):
    content: Text | Unset = UNSET
    first_episode_id: Id | None | Unset = UNSET
    last_episode_id: Id | None | Unset = UNSET
    episode_count: Count | Unset = UNSET
    token_count: Count | None | Unset = UNSET
    metadata: Meta | Unset = UNSET
