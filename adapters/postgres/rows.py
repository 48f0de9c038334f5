"""Row <-> domain model mapping for PostgreSQL (metadata is ``jsonb``, read back as a dict)."""

from __future__ import annotations

import json
from typing import Any

from psycopg.types.json import Jsonb

from domain.models import Entity, Episode, Relationship, Session, Summary
from domain.outbox import OutboxJob


def _dumps(value: Any) -> str:
    # jsonb refuses the escape \u0000 as text does NUL: U+FFFD instead, as for every string (database.py)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("\\u0000", "\ufffd")


def jsonb(value: Any) -> Jsonb:
    return Jsonb(value, dumps=_dumps)


def stored_metadata(metadata: Any) -> tuple[Jsonb, dict[str, Any]]:
    """The value to store and the value a later read returns, so a write answers the same."""
    if not metadata:
        return jsonb({}), {}
    return jsonb(metadata), json.loads(_dumps(metadata))


def live(alias: str = "") -> str:
    """The condition "not expired" on a table with ``expires_at`` (one parameter: now)."""
    return f"({alias}expires_at IS NULL OR {alias}expires_at > %s)"


def owned(user_id: str | None, global_records: bool = True) -> tuple[str, tuple]:
    """`` AND`` the condition "of this user (and the global records)" with its parameters;
    nothing without a user."""
    if user_id is None:
        return "", ()
    return (" AND (user_id IS NULL OR user_id = %s)" if global_records else " AND user_id = %s"), (user_id,)


def session_of(row) -> Session:
    return Session(row["id"], row["external_id"], row["metadata"], row["created_at"], row["updated_at"],
                   row["user_id"], row["agent_id"])


def episode_of(row) -> Episode:
    return Episode(row["id"], row["session_id"], row["user_message"], row["ai_response"], row["token_count"],
                   row["metadata"], row["created_at"], row["user_id"], row["agent_id"], row["expires_at"])


def entity_of(row) -> Entity:
    return Entity(row["id"], row["name"], row["type"], row["notes"], row["metadata"], row["created_at"],
                  row["updated_at"], row["user_id"], row["expires_at"])


def relationship_of(row) -> Relationship:
    return Relationship(row["id"], row["from_id"], row["to_id"], row["label"], row["metadata"], row["created_at"],
                        user_id=row["user_id"], valid_from=row["valid_from"], valid_to=row["valid_to"])


def summary_of(row) -> Summary:
    return Summary(row["id"], row["session_id"], row["content"], row["first_episode_id"], row["last_episode_id"],
                   row["episode_count"], row["token_count"], row["metadata"], row["created_at"],
                   row["user_id"], row["agent_id"], row["expires_at"])


def job_of(row) -> OutboxJob:
    return OutboxJob(row["id"], row["collection"], row["op"], row["ref_id"], row["attempts"], row["created_at"],
                     row["next_attempt_at"], row["last_error"], row["dead_at"])


# The row mapper of each record kind (its table carries the kind's name).
ROW_OF = {"episodes": episode_of, "entities": entity_of, "summaries": summary_of}

# Every column but the keyword vector: ``SELECT *`` would ship each row's tsvector too.
COLUMNS = {
    "sessions": "*",
    "episodes": "id, session_id, user_message, ai_response, token_count, metadata, created_at, user_id,"
                " agent_id, expires_at",
    "entities": "id, name, type, notes, metadata, created_at, updated_at, user_id, expires_at",
    "summaries": "id, session_id, content, first_episode_id, last_episode_id, episode_count, token_count,"
                 " metadata, created_at, user_id, agent_id, expires_at",
    "relationships": "*",
}


def columns(table: str, alias: str = "") -> str:
    found = COLUMNS[table]
    if found == "*" or not alias:
        return f"{alias}*" if found == "*" else found
    return ", ".join(f"{alias}{c.strip()}" for c in found.split(","))
