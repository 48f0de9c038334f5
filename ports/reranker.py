"""The Reranker port: score query–text pairs with a stronger model, to reorder a ranker's best hits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Reranker(Protocol):
    """A model that reads the query and each candidate text together (a cross-encoder, usually
    served over HTTP), slower than the legs but better at telling an answer from a near miss.

    ``name`` appears in logs and warnings."""

    name: str

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in the order given, higher meaning more relevant; an empty
        ``texts`` gives ``[]`` without a call. A backend that cannot answer (unreachable, an error
        status, a malformed body, a score missing for some text) raises a ``DomainError``; the
        search then keeps the ranker's order and says so in its warnings."""
        ...
