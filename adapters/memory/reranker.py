"""WordOverlapReranker: an in-memory Reranker for tests: the share of the query's words a text holds."""

from __future__ import annotations

import re
from collections.abc import Sequence

from domain.errors import Unavailable

_WORD = re.compile(r"\w+")


class WordOverlapReranker:
    name = "word overlap"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.down = False  # when set, every call fails as an unreachable server would

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        self.calls.append((query, list(texts)))
        if self.down:
            raise Unavailable("word overlap reranker is down")
        wanted = set(_WORD.findall(query.casefold()))
        return [len(wanted & set(_WORD.findall(text.casefold()))) / max(1, len(wanted)) for text in texts]
