"""Listing: every kind's records filtered, ordered by (created_at, id) and paged by position.

One port for the keyset lists of all kinds (rather than one more method in each room), so each
room stays small and the keyset rule is stated once. The rule, for every method: the records
matching every filter the query sets for that kind (``query.metadata`` by ``MetadataFilter.matches``),
ordered by ``(created_at, id)`` in ``query.order``, strictly after ``query.after`` in that order
when it is set, at most ``query.limit`` of them; ``next`` is the last one's position when more
match, else ``None``. Rows written between two pages never make a page repeat or skip a row that
existed before the walk began. Expired records (``expires_at`` past) are never listed.
"""

from __future__ import annotations

from typing import Protocol

from domain.listing import Listed, ListQuery
from domain.models import Entity, Episode, Relationship, Session, Summary


class Listing(Protocol):
    async def sessions(self, query: ListQuery) -> Listed[Session]:
        """Filters: ``user_id``, ``agent_id``."""
        ...

    async def episodes(self, query: ListQuery) -> Listed[Episode]:
        """Filters: ``session_id``, ``user_id``, ``agent_id``."""
        ...

    async def entities(self, query: ListQuery) -> Listed[Entity]:
        """Filters: ``type``, ``user_id``."""
        ...

    async def relationships(self, query: ListQuery) -> Listed[Relationship]:
        """Filters: ``entity_id`` (either end), ``label``, ``user_id``."""
        ...

    async def summaries(self, query: ListQuery) -> Listed[Summary]:
        """Filters: ``session_id``, ``user_id``, ``agent_id``."""
        ...
