"""Keyword query handling: turning what a user typed into terms, never into query syntax.

The store receives a `KeywordQuery`; only the ``fts`` mode carries raw syntax through, and only
when the caller asked for it. Every other mode is built from word terms, so quotes, operators
and parentheses a user types are just characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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

# The most matches one keyword search ranks. BM25 scores every match before it can take the top k
# (about 1 µs of CPU per match in SQLite FTS5, measured at 1M episodes), so one term found in a few
# percent of a large store made a search cost tens to hundreds of ms. Above this many matches the
# most frequent terms are left out (see `within_budget`). At 5,000 the ranking stays within ~5 ms.
MATCH_BUDGET = 5_000


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    """A keyword search request: plain terms combined with AND (``all``) or OR (``any``), or raw
    FTS5 syntax (``fts``) passed through in ``raw``."""

    terms: tuple[str, ...]
    mode: MatchMode = "all"
    raw: str | None = None
    budget: int | None = MATCH_BUDGET
    """At most this many matches are ranked (`within_budget`); ``None``: no bound."""

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


@dataclass(frozen=True, slots=True)
class KeywordPlan:
    """What a keyword search runs within its budget: ``query`` (the terms kept) ranked over all of
    its matches, or, when ``newest`` is set, over only the newest ``newest`` of them (by id)."""

    query: KeywordQuery
    dropped: tuple[str, ...] = ()
    newest: int | None = None
    matches: int | None = field(default=None, compare=False)
    """How many matches the ranking walks, as far as the counts tell (a count stops past the budget;
    ``None``: not counted). Not part of the plan's identity: an adapter reads it to judge the
    ranking's cost (where to run it)."""

    @property
    def bounded(self) -> bool:
        return bool(self.dropped) or self.newest is not None


def counted(query: KeywordQuery) -> tuple[KeywordQuery, ...]:
    """The queries whose match counts `within_budget` needs: each term of an ``any`` query with
    several terms (the rule may leave some out), else the query itself. An adapter counts each up
    to ``budget + 1`` (counting stops there: enough to know it is over)."""
    if query.budget is None or query.is_empty:
        return ()
    if query.mode == "any" and len(query.terms) > 1:
        return tuple(KeywordQuery((term,), "all", budget=query.budget) for term in query.terms)
    return (query,)


def fits_whatever_it_matches(query: KeywordQuery, most: int) -> bool:
    """Whether `within_budget` would keep ``query`` whole (every term, no cut to the newest) for any
    counts, given that each query `counted` names matches at most ``most`` records — e.g. the
    store holds no more than ``most``. Then its counts need not be taken: the plan is the query."""
    parts = counted(query)
    return not parts or len(parts) * most <= (query.budget or 0)


def within_budget(query: KeywordQuery, counts: Mapping[KeywordQuery, int], scoped: bool = False) -> KeywordPlan:
    """The keyword search to run, given the match count of each query `counted` names.

    The rule, with one parameter (``query.budget``): an ``any`` query keeps its terms from the
    rarest up while their summed document frequencies (an upper bound on the matches) stay within
    the budget, and leaves out the rest: the most frequent terms, whose low IDF adds least to BM25
    (and which the vector leg of a hybrid search still covers). The rarest term is always kept. When
    the query that remains still matches more than the budget (its rarest term alone does, or an
    ``all``/``fts`` query does), only its newest ``budget`` matches are ranked: FTS walks its
    matches by id cheaply; it is scoring them all that costs.

    A ``scoped`` search (by session, time, owner or metadata) keeps the term rule but is never cut
    to the newest matches: those are the whole store's newest, and the cut would drop a scope's
    older records (a user's old memories) rather than bound the work fairly.
    """
    budget = query.budget
    if budget is None or query.is_empty:
        return KeywordPlan(query)
    if not (query.mode == "any" and len(query.terms) > 1):
        over = counts[query] > budget and not scoped
        return KeywordPlan(query, newest=budget if over else None, matches=budget if over else counts[query])
    frequency = {term: counts[KeywordQuery((term,), "all", budget=budget)] for term in query.terms}
    by_rarity = sorted(query.terms, key=lambda term: frequency[term])  # stable: ties keep their order
    kept, total = {by_rarity[0]}, frequency[by_rarity[0]]
    for term in by_rarity[1:]:
        if total + frequency[term] > budget:
            break
        kept.add(term)
        total += frequency[term]
    plan = replace(query, terms=tuple(t for t in query.terms if t in kept))
    dropped = tuple(t for t in query.terms if t not in kept)
    over = total > budget and not scoped
    return KeywordPlan(plan, dropped, budget if over else None, matches=budget if over else total)
