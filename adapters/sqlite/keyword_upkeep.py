"""Keeping the FTS5 keyword indexes merged while the writer is idle.

FTS5 adds a b-tree segment to an index at every commit that wrote to it and merges segments as
writes go on (``automerge``: when four share a level). After a burst of small commits — one POST
each, a few per group commit — an index holds many small segments, and a keyword search reads a
term's postings from every one of them. The peer bench's 2,000 searches took 20 % less CPU in the
SQLite adapter once the segments left by its POST row had been merged (round 7: 350-490 →
300-400 µs per search; `optimize`, one segment, was not cheaper than this).

``KeywordUpkeep`` is driven by the writer thread: after writes it asks to be woken once the
queue has been empty for ``IDLE_SECONDS``; then each ``step`` is one short transaction running
FTS5's ``merge`` command (at most ``PAGES`` pages written, a few milliseconds) over each keyword
index, with ``usermerge`` 2 (two segments on a level are merged, not four), ``STEP_GAP`` apart,
until FTS5 finds nothing to merge. A step is only taken when the writer turn is free at once
(several processes write one file: a step never makes another process's writes wait, and they
get in between steps); a write of this process that arrives meanwhile waits for one step at most;
under a steady flow of writes it never runs. A failed step (disk full, a lock) is logged and
dropped until the next writes.
"""

from __future__ import annotations

import logging

from adapters.sqlite.driver import sqlite3

log = logging.getLogger(__name__)

IDLE_SECONDS = 0.5  # quiet time after the last write before merging starts
STEP_GAP = 0.01  # between two steps: other processes' writers take their turns in it (a waiting one is woken by the release)
PAGES = 64  # pages a merge step may write (4 KiB each)
USERMERGE = 2


class KeywordUpkeep:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._tables: list[str] | None = None  # the keyword indexes, usermerge set: known once committed
        self._pending = False  # writes since the indexes were last found merged
        self._merging = False  # the last step found work: the next one follows shortly

    def written(self) -> None:
        self._pending, self._merging = True, False

    def wait(self) -> float | None:
        """How long the writer may wait for its next write before calling ``step`` (None: forever)."""
        if not self._pending:
            return None
        return STEP_GAP if self._merging else IDLE_SECONDS

    def step(self, turn) -> None:
        """One merge step over every keyword index (one transaction), only when the writer turn
        (``WriterTurn``/``NoTurn``) is free at once: the upkeep never makes another process's
        writes wait. Done when no index had anything to merge."""
        if not turn.attempt():
            self._merging = False  # busy elsewhere: try again after the idle time
            return
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            tables = self._tables or self._configure()
            worked = any([self._merge(table) for table in tables])
            conn.execute("COMMIT")
            self._tables = tables
        except Exception as exc:  # sqlite3's, or anything else: the writer thread must outlive it
            log.warning("keyword index merge skipped: %s", exc)
            worked = False
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
        finally:
            turn.release()
        self._pending = self._merging = worked

    def _configure(self) -> list[str]:
        """The keyword indexes, each told ``usermerge`` (in the step's transaction: kept once it commits)."""
        tables = [name for (name,) in self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5(%'")]
        for table in tables:
            self._conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('usermerge', {USERMERGE})")
        return tables

    def _merge(self, table: str) -> bool:
        """True when FTS5 found segments to merge (it reports work as two or more changes)."""
        before = self._conn.total_changes
        self._conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', {PAGES})")
        return self._conn.total_changes - before >= 2
