"""Keyword search in memory: whole words, case-insensitive, scored by term frequency; no
stemming, and mode ``fts`` is read as plain terms."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

from adapters.memory.state import MemoryState, live
from domain.filters import MetadataFilter
from domain.keywords import KeywordQuery, counted, within_budget
from domain.models import Entity, Episode, KeywordHit, Owner, format_timestamp
from domain.record_kinds import KINDS, Source

_WORD = re.compile(r"\w+", re.UNICODE)


class MemoryKeywordIndex:
    parses_query_syntax = False

    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def search(
        self, source: Source, query: KeywordQuery, limit: int, session_id: int | None = None,
        since: datetime | None = None, until: datetime | None = None, owner: Owner = Owner(),
        metadata: MetadataFilter | None = None, global_records: bool = False,
    ) -> list[KeywordHit]:
        if query.is_empty or limit <= 0 or not query.terms:
            return []
        kind = KINDS[source]
        table = getattr(self._s, kind.name)
        lo = format_timestamp(since) if since else None
        hi = format_timestamp(until) if until else None
        # The same budget rule as SQLite's, over the same counts: every record the index holds.
        words_of = {item.id: Counter(_WORD.findall(_searchable(item).casefold())) for item in table.values()}
        scoped = session_id is not None and kind.in_sessions or bool(lo or hi or metadata) \
            or owner.user_id is not None or owner.agent_id is not None and kind.in_sessions
        plan = within_budget(query, {part: len(_matching(words_of, part)) for part in counted(query)}, scoped)
        query = plan.query
        first = min(sorted(_matching(words_of, query))[-plan.newest:], default=0) if plan.newest else None
        hits = []
        for item in table.values():
            if first is not None and item.id < first:
                continue
            if session_id is not None and kind.in_sessions and item.session_id != session_id:
                continue
            if (lo and item.created_at < lo) or (hi and item.created_at > hi):
                continue
            if not live(item) or not (global_records and item.user_id is None) and (
                    (owner.user_id is not None and item.user_id != owner.user_id)
                    or (owner.agent_id is not None and kind.in_sessions and item.agent_id != owner.agent_id)):
                continue
            if metadata and not metadata.matches(item.metadata):
                continue
            # Every word counts, repeats included: term frequency is what orders the hits.
            words = words_of[item.id]
            counts = {t: words[t] for t in query.terms}
            matched = [t for t, n in counts.items() if n]
            if not matched or (query.mode != "any" and len(matched) < len(query.terms)):
                continue
            hits.append(KeywordHit(item, float(len(matched)) + 0.01 * sum(counts.values())))
        hits.sort(key=lambda h: (-h.score, h.item.id))
        return hits[:limit]


def _matching(words_of: dict[int, Counter], query: KeywordQuery) -> list[int]:
    """The ids of the records ``query`` matches (any or all of its terms), live or not."""
    need = any if query.mode == "any" else all
    return [i for i, words in words_of.items() if need(words[t] for t in query.terms)]


def _searchable(item: object) -> str:
    """The columns SQLite's keyword index holds for each kind."""
    if isinstance(item, Episode):
        return f"{item.user_message}\n{item.ai_response}"
    if isinstance(item, Entity):
        return f"{item.name}\n{item.type}\n{item.notes or ''}"
    return item.content  # type: ignore[attr-defined]
