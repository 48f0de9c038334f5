"""The keyset pages' wire shapes (``domain.listing.CursorPage``), beside ``app.schemas``'s offset pages."""

from __future__ import annotations

from typing import Generic

from app.schemas import Camel, EntityOut, EpisodeOut, RelationshipOut, SessionOut, SummaryOut, T


# A keyset page (GET /episodes, /entities, /relationships, /summaries, and /sessions when asked
# with cursor/order/filter): no total (counting every match would cost what keyset avoids);
# ``nextCursor`` is null on the last page. A separate generic, so the offset pages keep their shape.
class CursorPage(Camel, Generic[T]):
    items: list[T]
    limit: int
    next_cursor: str | None


class SessionCursorPage(CursorPage[SessionOut]):
    items: list[SessionOut]  # named again, as for Page


class EpisodeCursorPage(CursorPage[EpisodeOut]):
    items: list[EpisodeOut]


class EntityCursorPage(CursorPage[EntityOut]):
    items: list[EntityOut]


class RelationshipCursorPage(CursorPage[RelationshipOut]):
    items: list[RelationshipOut]


class SummaryCursorPage(CursorPage[SummaryOut]):
    items: list[SummaryOut]
