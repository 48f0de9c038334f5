"""Temporal grounding without a parser: is a question about time, and does a memory say when.

A "when" question is answered by a turn that dates its event ("yesterday", "last week", "in
May"), and a question that names a month or year is about memories from then. Both are plain word
lists: cheap, predictable, and wrong in the same harmless way on every language they do not know.
"""

from __future__ import annotations

import re
from datetime import datetime

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")

_ASKS_TIME = re.compile(
    r"\b(when|what (?:date|day|year|month|time)|which (?:date|day|year|month)|how long(?: ago)?|since when)\b",
    re.IGNORECASE,
)
# Words that date an event on their own, and the units that "last/next/this" turn into a date.
# A set lookup per word: a regex alternation of these costs ten times more per candidate.
_TIME_WORDS = frozenset(
    """yesterday today tonight tomorrow ago recently lately since weekend monday tuesday wednesday
    thursday friday saturday sunday""".split() + [m for m in MONTHS if m != "may"]
)
_TIME_UNITS = frozenset("week weekend month year night summer winter spring fall autumn morning".split())
_DEICTIC = frozenset(("last", "next", "this", "past"))
_TOKEN = re.compile(r"[a-z0-9]+")
_MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b", re.IGNORECASE)
_YEAR = re.compile(r"\b((?:19|20)\d\d)\b")


def asks_about_time(query: str) -> bool:
    """A question whose answer is a date or a span ("when ...", "how long ago ...")."""
    return _ASKS_TIME.search(query) is not None


def says_when(text: str) -> bool:
    """The text dates something: a relative ("yesterday", "last week") or absolute (a month, a
    year) time. "May" is left out: as a word it is mostly the verb."""
    previous = ""
    for word in _TOKEN.findall(text.lower()):
        if word in _TIME_WORDS or (word in _TIME_UNITS and previous in _DEICTIC):
            return True
        if len(word) == 4 and word[:2] in ("19", "20") and word.isdigit():
            return True
        previous = word
    return False


def named_period(query: str) -> tuple[int | None, int | None]:
    """The (month, year) a query names, either possibly ``None``; "may" counts as a month only
    next to a year or after "in"/"last"/"of", since it is mostly a verb."""
    year_match = _YEAR.search(query)
    year = int(year_match.group(1)) if year_match else None
    month = None
    for match in _MONTH.finditer(query):
        word = match.group(1).lower()
        before = query[: match.start()].rstrip().lower()
        if word != "may" or year is not None or before.endswith(("in", "last", "of", "early", "late")):
            month = MONTHS.index(word) + 1
            break
    return month, year


def within(moment: datetime, month: int | None, year: int | None) -> bool:
    """Whether ``moment`` falls in the named month and/or year (nothing named: False)."""
    if month is None and year is None:
        return False
    return (month is None or moment.month == month) and (year is None or moment.year == year)
