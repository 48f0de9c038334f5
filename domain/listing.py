"""Listing records: filters, order and keyset ("cursor") pagination, declared once for every kind.

A list is ordered by ``(created_at, id)`` — ascending (oldest first, the default, as the seed's
lists) or descending (newest first). A page holds at most ``limit`` records and, when more
follow, a ``Position``: the ``(created_at, id)`` of its last record. The next page asks for the
records strictly after that position in the same order. Because the position is a value, not a
row count, rows inserted (or deleted) between two pages never make a page repeat or skip a row
that existed when the walk began; a row inserted behind the cursor is simply not seen.

On the wire a position is an opaque cursor: base64url of a small JSON array naming the kind and
the order it was made for, so a cursor from another list or another order is a 400, never a
silently wrong page. Clients must not build or parse cursors.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from domain.errors import Invalid
from domain.filters import MetadataFilter, parse_filter
from domain.limits import MAX_ID, MAX_LIMIT
from domain.models import parse_timestamp

T = TypeVar("T")

Order = Literal["asc", "desc"]
ORDERS: tuple[Order, ...] = ("asc", "desc")
ListKind = Literal["sessions", "episodes", "entities", "relationships", "summaries"]
MAX_CURSOR = 512  # characters; a real cursor is well under 100
MAX_FILTER_TEXT = 2048  # characters of the JSON-encoded ``filter`` query parameter (a URL must stay short)
_CURSOR_VERSION = 1


@dataclass(frozen=True, slots=True)
class Position:
    """Where a page ended: the ordering key of its last record."""

    created_at: str
    id: int


@dataclass(frozen=True, slots=True)
class ListQuery:
    """What a list asks for. Each kind reads the fields that apply to it and ignores the others
    (the services only set those): ``session_id`` (episodes, summaries), ``type`` (entities),
    ``entity_id`` (relationships: either end), ``label`` (relationships), ``user_id`` (every kind:
    the record's own owner), ``agent_id`` (sessions, episodes, summaries), ``as_of`` (relationships:
    those valid at that canonical timestamp, ``Relationship.valid_at``)."""

    limit: int
    order: Order = "asc"
    after: Position | None = None
    metadata: MetadataFilter = field(default_factory=MetadataFilter)
    session_id: int | None = None
    type: str | None = None
    entity_id: int | None = None
    label: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    as_of: str | None = None

    def follows(self, created_at: str, record_id: int) -> bool:
        """Whether a record with this key comes after ``after`` in this order (the keyset rule)."""
        if self.after is None:
            return True
        key, at = (created_at, record_id), (self.after.created_at, self.after.id)
        return key > at if self.order == "asc" else key < at


@dataclass(frozen=True, slots=True)
class Listed(Generic[T]):
    """One page of a keyset list: ``next`` is ``None`` on the last page."""

    items: list[T]
    limit: int
    next: Position | None


def page_from(found: list[T], limit: int) -> Listed[T]:
    """A page from up to ``limit + 1`` records read in order (the extra one says more follow)."""
    if len(found) <= limit:
        return Listed(found, limit, None)
    items = found[:limit]
    last = items[-1]
    return Listed(items, limit, Position(last.created_at, last.id))  # type: ignore[attr-defined]


# -- the cursor codec -----------------------------------------------------------------------------
def encode_cursor(kind: ListKind, order: Order, position: Position | None) -> str | None:
    if position is None:
        return None
    raw = json.dumps([_CURSOR_VERSION, kind, order, position.created_at, position.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, kind: ListKind, order: Order) -> Position | None:
    """The position a cursor names, or ``Invalid`` (field ``cursor``) for anything this list did
    not hand out: malformed text, another list, another order."""
    if cursor is None:
        return None
    bad = Invalid("cursor is not a cursor this list handed out (pass nextCursor back unchanged, "
                  "with the same order)", field="cursor")
    if not cursor or len(cursor) > MAX_CURSOR:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, got_kind, got_order, created_at, record_id = json.loads(raw)
    except (ValueError, TypeError, binascii.Error):
        raise bad from None
    if (version, got_kind) != (_CURSOR_VERSION, kind) or not isinstance(created_at, str) or len(created_at) > 64 \
            or type(record_id) is not int or not 0 <= record_id <= MAX_ID or not _is_timestamp(created_at):
        raise bad
    if got_order != order:
        raise Invalid(f"cursor was made for order={got_order}; ask with the same order", field="cursor")
    return Position(created_at, record_id)


def _is_timestamp(text: str) -> bool:
    """Whether a cursor's position names an instant (an edited one that does not would page from a
    point no record has: a silently empty or repeated page)."""
    try:
        parse_timestamp(text)
    except ValueError:
        return False
    return True


# -- the rules a list request satisfies ----------------------------------------------------------
def metadata_filter(raw: str | None) -> MetadataFilter:
    """The ``filter`` query parameter: the JSON text of ``{"metadata": {...}}`` (see ``domain.filters``)."""
    if raw is None:
        return MetadataFilter()
    if len(raw) > MAX_FILTER_TEXT:
        raise Invalid(f"filter is longer than {MAX_FILTER_TEXT} characters", field="filter")
    try:
        decoded: Any = json.loads(raw)
    except (ValueError, RecursionError):
        raise Invalid('filter must be JSON such as {"metadata": {"topic": "pets"}}', field="filter") from None
    try:  # json.loads takes a lone surrogate escape ("\\ud800"), which no store can hold or compare
        json.dumps(decoded, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid("filter must hold text only (a lone surrogate escape is not a character)", field="filter") from None
    return parse_filter(decoded)


def list_query(kind: ListKind, *, limit: int, order: str, cursor: str | None, filter: str | None,
               **fields: Any) -> ListQuery:
    """The checked ``ListQuery`` for ``kind`` (every problem a 400 naming its parameter)."""
    if limit < 1 or limit > MAX_LIMIT:
        raise Invalid(f"limit must be between 1 and {MAX_LIMIT}", field="limit")
    if order not in ORDERS:
        raise Invalid("order must be asc or desc", field="order")
    checked: Order = order  # type: ignore[assignment]
    return ListQuery(limit=limit, order=checked, after=decode_cursor(cursor, kind, checked),
                     metadata=metadata_filter(filter), **fields)


@dataclass(frozen=True, slots=True)
class CursorPage(Generic[T]):
    """A keyset page as the edges show it: ``next_cursor`` is the opaque cursor of the next page."""

    items: list[T]
    limit: int
    next_cursor: str | None


async def fetch_page(kind: ListKind, fetch: Callable[[ListQuery], Awaitable[Listed[T]]], *, limit: int, order: str,
                     cursor: str | None, filter: str | None, **fields: Any) -> CursorPage[T]:
    """Check the request, read one page through ``fetch`` (a ``ports.listing`` method), hand out its cursor."""
    query = list_query(kind, limit=limit, order=order, cursor=cursor, filter=filter, **fields)
    page = await fetch(query)
    return CursorPage(page.items, page.limit, encode_cursor(kind, query.order, page.next))
