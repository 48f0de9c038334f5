"""Row <-> domain model mapping and the FTS5 query builder."""

from __future__ import annotations

import json
from typing import Any

from adapters.sqlite.driver import sqlite3
from domain.keywords import KeywordQuery
from domain.models import Entity, Episode, Relationship, Session, Summary
from domain.outbox import OutboxJob


def dump_metadata(metadata: Any) -> str:
    return json.dumps(metadata or {}, ensure_ascii=False, separators=(",", ":"))


def _meta(text: str | None) -> dict[str, Any]:
    # Most rows carry no metadata: "{}" needs no JSON parser (a page of 20 rows parsed 20 of them).
    return json.loads(text) if text and text != "{}" else {}


def stored_metadata(metadata: Any) -> tuple[str, dict[str, Any]]:
    """The JSON text to store and the value a later read returns, so a write answers the same."""
    if not metadata:  # most writes carry none: no JSON round trip for "{}"
        return "{}", {}
    text = dump_metadata(metadata)
    return text, json.loads(text)


def session_of(row: sqlite3.Row) -> Session:
    return Session(row["id"], row["external_id"], _meta(row["metadata"]), row["created_at"], row["updated_at"],
                   row["user_id"], row["agent_id"])


def episode_of(row: sqlite3.Row) -> Episode:
    return Episode(
        row["id"], row["session_id"], row["user_message"], row["ai_response"],
        row["token_count"], _meta(row["metadata"]), row["created_at"], row["user_id"], row["agent_id"],
        row["expires_at"],
    )


def entity_of(row: sqlite3.Row) -> Entity:
    return Entity(
        row["id"], row["name"], row["type"], row["notes"], _meta(row["metadata"]),
        row["created_at"], row["updated_at"], row["user_id"], row["expires_at"],
    )


def relationship_of(row: sqlite3.Row) -> Relationship:
    return Relationship(
        row["id"], row["from_id"], row["to_id"], row["label"], _meta(row["metadata"]), row["created_at"],
        user_id=row["user_id"], valid_from=row["valid_from"], valid_to=row["valid_to"],
    )


def summary_of(row: sqlite3.Row) -> Summary:
    return Summary(
        row["id"], row["session_id"], row["content"], row["first_episode_id"], row["last_episode_id"],
        row["episode_count"], row["token_count"], _meta(row["metadata"]), row["created_at"],
        row["user_id"], row["agent_id"], row["expires_at"],
    )


def live(alias: str = "") -> str:
    """The condition "not expired" on a table with ``expires_at`` (one parameter: now)."""
    return f"({alias}expires_at IS NULL OR {alias}expires_at > ?)"


def owned(user_id: str | None, global_records: bool = True) -> tuple[str, tuple]:
    """`` AND`` the condition "of this user (and the global records)" with its parameters;
    nothing without a user."""
    if user_id is None:
        return "", ()
    return (" AND (user_id IS NULL OR user_id = ?)" if global_records else " AND user_id = ?"), (user_id,)


def job_of(row: sqlite3.Row) -> OutboxJob:
    return OutboxJob(
        row["id"], row["collection"], row["op"], row["ref_id"], row["attempts"], row["created_at"],
        row["next_attempt_at"], row["last_error"], row["dead_at"],
    )


def fts_match(query: KeywordQuery) -> str:
    """The MATCH expression for a query. Plain terms are quoted, so they are never syntax."""
    if query.mode == "fts":
        return query.raw or ""
    quoted = ['"' + term.replace('"', '""') + '"' for term in query.terms]
    return (" OR " if query.mode == "any" else " ").join(quoted)


# The row mapper of each record kind (its table and keyword index carry the kind's name).
ROW_OF = {"episodes": episode_of, "entities": entity_of, "summaries": summary_of}
