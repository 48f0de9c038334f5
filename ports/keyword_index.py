"""Keyword search over the text of every record kind."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from domain.keywords import KeywordQuery
from domain.filters import MetadataFilter
from domain.models import KeywordHit, Owner
from domain.record_kinds import Source


class KeywordIndex(Protocol):
    parses_query_syntax: bool
    """Whether a query in mode ``fts`` is read as a query language (phrases, AND/OR/NOT, prefix*),
    so a malformed one is refused with ``Invalid``; when ``False`` its words are matched as plain terms."""

    async def search(
        self,
        source: Source,
        query: KeywordQuery,
        limit: int,
        session_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        owner: Owner = Owner(),
        metadata: MetadataFilter | None = None,
        global_records: bool = False,
    ) -> list[KeywordHit]:
        """Best first (BM25 or the adapter's equivalent), at most ``limit`` hits, ties by id.

        ``all``: every term must occur; ``any``: at least one. Terms are matched as words, never
        as syntax. An empty query returns no hits. In ``fts`` mode a syntax error raises
        ``Invalid`` (field ``q``). ``session_id`` does not apply to kinds outside sessions
        (entities); ``since``/``until`` bound ``created_at`` inclusively. ``owner`` keeps the records
        of that user (``user_id``) and agent (``agent_id``; not applied to entities, which have no
        agent), and with ``global_records`` the records of no user (``user_id`` None) too;
        ``metadata`` keeps the records whose metadata ``MetadataFilter.matches``. Expired records
        are never returned (a hit list may then hold fewer than ``limit``).
        """
        ...
