"""The service's input limits, declared once.

The wire schemas (``app/schemas.py``, ``app/routes/deps.py``: msgspec/Litestar constraints, so a
violation is a 400 naming the field before any service runs) and the domain rules
(``domain/services.py`` and the retrieval/context services, which guard every other entry point:
CLI, MCP, tests) read the same numbers from here.
"""

from __future__ import annotations

MAX_ID = 2**63 - 1  # SQLite's largest integer: beyond it the store would overflow, not answer
MAX_OFFSET = MAX_ID
MAX_COUNT = 2**31  # the API's token count range
MAX_TEXT = 100_000  # characters of an episode message, entity notes or summary content
MAX_NAME = 512  # characters of an external id, entity name/type or relationship label
MAX_LIMIT = 1000  # page size of a list or keyword search
MAX_BATCH = 1000  # episodes in one POST /episodes/batch
MAX_KEYWORD_QUERY = 2000  # characters of GET /episodes/search?q=
MAX_QUERY = 4000  # characters of a /search or /context query
MAX_SEARCH_LIMIT = 200  # hits of one /search
MAX_SOURCES = 3  # sources named in one /search
MAX_RANKER_NAME = 200  # characters of a ranker name
MAX_TOKEN_BUDGET = 10_000_000  # tokenBudget of one /context
MAX_RECENT_EPISODES = 100  # recentEpisodes of one /context
MAX_RELEVANT = 100  # relevantLimit of one /context
# Metadata deeper than this is refused: near the interpreter's recursion limit a value that was
# stored could no longer be read back in a list, breaking that list for every client.
MAX_METADATA_DEPTH = 128
MAX_EVENTS = 1000  # events in one GET /events answer
MAX_EVENT_WAIT = 30  # seconds one GET /events may wait for new events (a long-poll)
MAX_EVENT_WAITERS = 64  # long-polls waiting at once; beyond that an answer comes at once (exempt from admission control)
MAX_ACTOR = 200  # characters of an X-Actor header
