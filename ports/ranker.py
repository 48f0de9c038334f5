"""The Ranker port: fuse and order the two retrieval legs of one search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from domain.ranking import RankedHit, RankingRequest


class Ranker(Protocol):
    """A named ordering of search candidates, registered by a plugin.

    ``name`` is what ``DEFAULT_RANKER`` and the ``ranker`` field of ``POST /search`` select;
    ``description`` is one line for ``GET /rankers``. ``needs_vectors`` asks the retrieval service
    to load each candidate's stored vector into ``Candidate.vector``; it costs a round trip to the
    vector index, so only rankers that compare vectors set it.

    ``context_window`` (optional, default 0) asks for conversation context: for every episode
    candidate that either leg ranks in its first ``CONTEXT_DEPTH`` (20), up to that many episodes on
    each side in session order are loaded as candidates too and listed in
    ``RankingRequest.neighbours``, so a ranker can lift the turn next to a strong hit even when
    neither leg found it. Each episode's ``created_at`` (its session date for imported
    conversations) is on its candidate. It costs two index seeks per such candidate; the service
    caps the window at ``MAX_CONTEXT_WINDOW``.

    ``relevance_floor`` (optional, default ``domain.relevance.DEFAULT_FLOOR``, 0.2) is the
    relevance, on the fixed 0–1 scale every hit carries, below which this ranker's hits are left
    out when a request gives no ``minScore``. The built-in rankers use the default: relevance is
    read from the hit's own evidence (cosine, words, neighbourhood), not from the ranker's score,
    so one floor means the same for all of them.

    Plugins may implement this by duck typing (any object with these attributes and method); the
    hits they return need only ``key`` and ``score`` attributes.
    """

    name: str
    description: str
    needs_vectors: bool
    context_window: int

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        """Order the candidates of one search.

        Contract: returns at most ``request.limit`` hits (none when the limit is 0 or less), best
        first; every key is a key of ``request.candidates`` and appears once; ties are broken by
        key, so the same request always gives the same answer; either or both legs may be empty
        and a leg hit without a candidate is skipped, never an error; the call is pure: no I/O,
        no clock (use ``request.now``), no mutation of the request.
        """
        ...
