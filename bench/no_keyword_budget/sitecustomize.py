"""``run.py --no-keyword-budget``: the server with the keyword budget off (the "before" rows).

The bench puts this folder on the server's ``PYTHONPATH``; Python imports ``sitecustomize`` at
start-up, and this one makes both keyword adapters rank every match (``KeywordPlan(query)``),
as before ``domain.keywords.MATCH_BUDGET``. Nothing else changes.
"""

from adapters.memory import keyword_index as _memory
from adapters.sqlite import keyword_index as _sqlite
from domain.keywords import KeywordPlan


def _unbounded(query, counts, scoped=False):
    return KeywordPlan(query)


_sqlite.within_budget = _memory.within_budget = _unbounded
_sqlite.counted = _memory.counted = lambda query: ()
