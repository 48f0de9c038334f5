"""Keeping the FTS5 keyword indexes merged while the writer is idle.

FTS5 adds a b-tree segment to an index at every commit that wrote to it and merges segments as
writes go on (``automerge``: when four share a level). After a burst of small commits — one POST
each, a few per group commit — an index holds many small segments, and a keyword search reads a
term's postings from every one of them. The peer bench's 2,000 searches took 20 % less CPU in the
SQLite adapter once the segments left by its POST row had been merged (350-490 →
300-400 µs per search; `optimize`, one segment, was not cheaper than this).

``KeywordUpkeep`` is driven by the writer thread: after writes it asks to be woken once the
queue has been empty for ``IDLE_SECONDS``; then each ``step`` is one short transaction running
FTS5's ``merge`` command (at most ``PAGES`` pages written, a few milliseconds) over each keyword
index, with ``usermerge`` 2 (two segments on a level are merged, not four), ``STEP_GAP`` apart,
until FTS5 finds nothing to merge. A step never waits for SQLite's write lock (``busy_timeout``
0 for its ``BEGIN``): when another process sharing the file writes, the step is skipped until the
next idle time, so it never makes that process's writes wait for more than one step; a write of
this process that arrives meanwhile waits for one step at most; under a steady flow of writes it
never runs. A failed step (disk full, a lock) is logged and
dropped until the next writes.
"""

from __future__ import annotations

import logging

from adapters.sqlite.driver import sqlite3

log = logging.getLogger(__name__)

IDLE_SECONDS = 0.5  # quiet time after the last write before merging starts
STEP_GAP = 0.01  # between two steps: other processes' writers get the write lock in it
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

    def step(self) -> None:
        """One merge step over every keyword index (one transaction), only when SQLite's write
        lock is free at once. Done when no index had anything to merge."""
        conn = self._conn
        try:
            if not self._begin():
                self._merging = False  # another process writes: try again after the idle time
                return
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
        self._pending = self._merging = worked

    def _begin(self) -> bool:
        """``BEGIN IMMEDIATE`` without waiting for the lock: False when another connection holds it."""
        (timeout,) = self._conn.execute("PRAGMA busy_timeout").fetchone()
        self._conn.execute("PRAGMA busy_timeout = 0")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return False
            raise
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")
        return True

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
