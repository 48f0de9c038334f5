"""Keyword query handling: turning what a user typed into terms, never into query syntax.

The store receives a `KeywordQuery`; only the ``fts`` mode carries raw syntax through, and only
when the caller asked for it. Every other mode is built from word terms, so quotes, operators
and parentheses a user types are just characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

MatchMode = Literal["all", "any", "fts"]
MATCH_MODES: tuple[str, ...] = ("all", "any", "fts")

_WORD = re.compile(r"\w+", re.UNICODE)

# A short English list: enough that "what did she say about the trip" searches for "say trip",
# not for every filler word (which would make OR-semantics match nearly every episode).
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don ll re ve d m
    o y also ever get got like really would could yeah oh ok okay hey hi""".split()
)

MAX_TERMS = 64


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    """A keyword search request: plain terms combined with AND (``all``) or OR (``any``), or raw
    FTS5 syntax (``fts``) passed through in ``raw``."""

    terms: tuple[str, ...]
    mode: MatchMode = "all"
    raw: str | None = None

    @property
    def is_empty(self) -> bool:
        return not self.terms and not (self.mode == "fts" and self.raw and self.raw.strip())


def terms_of(text: str, *, drop_stop_words: bool = False) -> tuple[str, ...]:
    """The distinct word terms of ``text``, lower-cased, in order of first appearance."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text.casefold()):
        word = match.group(0)
        if drop_stop_words and word in STOP_WORDS:
            continue
        seen.setdefault(word, None)
        if len(seen) >= MAX_TERMS:
            break
    return tuple(seen)


def plain_query(text: str, mode: MatchMode = "all") -> KeywordQuery:
    """A query from user text in one of the plain modes, or raw syntax for ``fts``."""
    if mode == "fts":
        return KeywordQuery(terms=terms_of(text), mode="fts", raw=text)
    return KeywordQuery(terms=terms_of(text), mode=mode)


def recall_query(text: str) -> KeywordQuery:
    """The keyword leg of hybrid retrieval: stop-words dropped, any term may match (recall)."""
    terms = terms_of(text, drop_stop_words=True) or terms_of(text)
    return KeywordQuery(terms=terms, mode="any")
