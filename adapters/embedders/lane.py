"""``EncodeLane``: one encode at a time on an in-process model, queries first.

The model runs one batch at a time (two would only fight for the same cores). Documents from the
embedding worker arrive in calls of many texts; a search embeds one. So documents take a turn per
batch of ``max_batch`` texts, and a query that is waiting goes before the next document batch:
it waits for at most the one batch being encoded, never for a whole document call. Queries among
themselves, and documents among themselves, keep no particular order. Priority is bounded: after
``QUERY_STREAK`` query turns in a row while a document waits, the document goes next, so a steady
stream of searches slows the embedding of new memories but never stops it.

Threading primitives: encodes run in worker threads (``asyncio.to_thread``), off the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


QUERY_STREAK = 4  # query turns in a row a waiting document lets pass before its own


class EncodeLane:
    def __init__(self) -> None:
        self._turns = threading.Condition()
        self._busy = False
        self._streak = 0  # query turns taken in a row while a document waited
        self._queries_waiting = 0
        self._documents_waiting = 0
        self.query_turns = 0  # turns taken, for tests and for anyone curious
        self.document_turns = 0

    @contextmanager
    def turn(self, *, query: bool) -> Iterator[None]:
        """Hold the model for one batch; a query's turn comes before any waiting document's."""
        with self._turns:
            if query:
                self._queries_waiting += 1
                try:
                    self._turns.wait_for(lambda: not self._busy and (
                        not self._documents_waiting or self._streak < QUERY_STREAK))
                finally:
                    self._queries_waiting -= 1
                self.query_turns += 1
                self._streak = self._streak + 1 if self._documents_waiting else 0
            else:
                self._documents_waiting += 1
                try:
                    self._turns.wait_for(lambda: not self._busy and (
                        not self._queries_waiting or self._streak >= QUERY_STREAK))
                finally:
                    self._documents_waiting -= 1
                self.document_turns += 1
                self._streak = 0
            self._busy = True
        try:
            yield
        finally:
            with self._turns:
                self._busy = False
                self._turns.notify_all()

    @property
    def queries_waiting(self) -> int:
        return self._queries_waiting

    @property
    def documents_waiting(self) -> int:
        return self._documents_waiting
