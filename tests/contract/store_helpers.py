"""Shared by the store's contract suites: fixed times, awkward texts, and small steps over a store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from domain import writes
from domain.keywords import plain_query
from domain.models import NewEpisode, Session, format_timestamp
from ports.store import Store

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
FAR_FUTURE = datetime(2100, 1, 1, tzinfo=UTC)
LATER = datetime.now(UTC) + timedelta(days=1)
NESTED = {"tags": ["a", "b"], "deep": {"n": 1, "x": [1.5, None, True]}, "naïve": "Zoë 東京 😀", "empty": {}}
SYNTAX_AND_UNICODE = [
    'don\'t "quote" (paren) AND OR NOT * ^ : -',
    "Zoë café naïve",
    "東京",
    "emoji 😀 party 🎉",
    'NEAR(a b) "unbalanced',
    "col:value {a b} + x^2",
    "tab\tnew\nline\x00nul",
    "'single' `back` \\ slash",
]


def at(minutes: int) -> str:
    return format_timestamp(T0 + timedelta(minutes=minutes))


async def a_session(store: Store, external_id: str = "conv-1") -> Session:
    return await store.uow.run(lambda tx: writes.create_session(tx, external_id, {}))


async def tick() -> None:
    # Timestamps have millisecond resolution; a later write must land in a later millisecond.
    await asyncio.sleep(0.005)


async def search(store: Store, text: str, mode: str = "all", source: str = "episodes",
                 limit: int = 10, session_id: int | None = None) -> list[int]:
    hits = await store.keywords.search(source, plain_query(text, mode), limit, session_id)  # type: ignore[arg-type]
    return [h.item.id for h in hits]


async def jobs(store: Store) -> list[tuple[str, str, int]]:
    return [(j.collection, j.op, j.ref_id) for j in await store.outbox.due(10_000, FAR_FUTURE)]


async def complete_due(store: Store) -> None:
    """Complete every due job as the worker does: in a unit of work (``writes.jobs_completed``)."""
    due = await store.outbox.due(10_000, FAR_FUTURE)
    await store.uow.run(lambda tx: writes.jobs_completed(tx, due))


async def due_jobs_of_new_episodes(store: Store, count: int):
    """``count`` new episodes in a fresh session, and the jobs they enqueued."""
    session = await store.uow.run(lambda tx: writes.create_session(tx, "dead-letters", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"u{i}", "a") for i in range(count)]))
    return await store.outbox.due(100, LATER)
