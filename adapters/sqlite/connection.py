"""How the service's SQLite connections are set up, and how a commit is made durable.

``SQLITE_SYNCHRONOUS=full`` (the default) promises that an acknowledged write survives power
loss. SQLite's ``synchronous = FULL`` keeps it by fsyncing the WAL inside COMMIT, while the
writer still holds the database's write lock: under a write load the lock would be held for the
fsync's 3-4 ms of every group commit, and no other writer (another process sharing the file, the
CLI) could write meanwhile. So a writer in WAL mode commits with ``synchronous = NORMAL`` and then,
after COMMIT has let the lock go and before answering any caller of the group, fdatasyncs the WAL
itself (``WalSync``): the next writer's transaction runs during the fsync. The promise is the same — nothing is acknowledged before its commit's
frames are on the disk; a later commit's fsync flushes the earlier frames of the file with it,
and a WAL is only checkpointed or restarted after SQLite has fsynced it (NORMAL keeps those
syncs), so a power cut keeps a prefix of the commits that includes every acknowledged one. What
differs: for the one fsync, a committed group is visible to readers before it is acknowledged;
a power cut in that window loses it (it was never acknowledged) and its ids are handed out
again. The change feed, whose sequence numbers a consumer keeps as its cursor, therefore makes
what it serves durable first (``SqliteEvents.after``). A failed fsync leaves a committed group
whose frames may never reach the disk, and later commits after it in the WAL: the writer answers
the group ``Unavailable`` and refuses every later write until the service is restarted (as
PostgreSQL stops after a failed fsync), so nothing is acknowledged beyond the hole. A database
that did not take WAL mode keeps SQLite's own FULL. ``SQLITE_SYNCHRONOUS=normal`` stays the
opt-in trade: no fsync at commit, the last commits may be lost on power loss (never on a process
crash).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from adapters.sqlite.driver import sqlite3

BUSY_TIMEOUT_MS = 5000
# What a connection keeps resident is bounded by its page cache, CACHE_KIB — except the one
# connection that maps the file: the event loop's, whose point and short reads are the hot path
# (a map spares them a read() per page). Each connection maps the file on its own and each
# mapping's pages count in the process's RSS, so with every connection mapped (a writer, four
# readers and the loop's) the pages of a 25 MB database after 20,000 episodes were
# resident up to six times over (44 MB), growing with the database up to MMAP_BYTES apiece; the
# readers' long reads (an index build's stream of every stored vector) and the writer's changes
# go through their caches instead, at a read() of the OS's page cache per page missed.
CACHE_KIB = 8192
MMAP_BYTES = 256 * 1024 * 1024
SYNCHRONOUS = ("full", "normal")
_fdatasync = getattr(os, "fdatasync", os.fsync)  # fsync where there is no fdatasync (macOS)


def _casefold(text: str | None) -> str | None:
    return None if text is None else text.casefold()


def _configure(conn: sqlite3.Connection, *, writer: bool, synchronous: str = "full",
               busy_timeout_ms: int = BUSY_TIMEOUT_MS, sync_after_commit: bool = False, mapped: bool = False) -> bool:
    """Set the connection up; True when its commits must be made durable by ``WalSync`` (asked
    for by ``sync_after_commit``, granted for a writer at ``full`` whose database is in WAL mode).
    ``mapped``: the connection reads the file through a memory map (see ``MMAP_BYTES``)."""
    # SQLite's lower() and LIKE fold ASCII only; name lookups must fold "ZOË" like Python does.
    conn.create_function("casefold", 1, _casefold, deterministic=True)
    # Each PRAGMA on its own statement: executescript would COMMIT implicitly and hide errors.
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    conn.execute("PRAGMA foreign_keys = ON")
    # A forgotten or expired memory's text is overwritten, not left in free pages (Debian's SQLite
    # is built with this on; the bundled one, driver.py, is not).
    conn.execute("PRAGMA secure_delete = ON")
    late = False
    if writer:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        late = sync_after_commit and synchronous == "full" and str(mode).lower() == "wal"
        # FULL fsyncs the WAL at every commit (here or, ``late``, in WalSync after the commit), so
        # an acknowledged write survives power loss; group commit spreads that one fsync over
        # every writer waiting. NORMAL alone may lose the last commits on power loss (never on a
        # process crash): an opt-in trade (SQLITE_SYNCHRONOUS).
        conn.execute(f"PRAGMA synchronous = {'NORMAL' if late else synchronous.upper()}")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    conn.execute("PRAGMA temp_store = MEMORY")
    if mapped:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    return late


class WalSync:
    """Makes the commits so far of a database in WAL mode durable: fdatasync of its WAL, the file
    SQLite writes (``<main database file>-wal``, named after a symlink's target as SQLite names
    it), through a descriptor kept open (a write-back error is reported to the descriptors open
    when it happens: a fresh one could miss an error another process has already been told of)
    and opened again if the path now names another file. A WAL that is not there while the
    writer's connection is open is an error, not a reason to skip the fsync."""

    def __init__(self, database_file: str) -> None:
        self.path = f"{database_file}-wal"
        self._fd: int | None = None
        self._lock = threading.Lock()

    def sync(self) -> None:
        """Raises ``OSError`` when the commits could not be made durable."""
        with self._lock:
            if self._fd is None or os.fstat(self._fd).st_ino != os.stat(self.path).st_ino:
                self._close()
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            _fdatasync(self._fd)

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        with self._lock:
            self._close()


def main_file(conn: sqlite3.Connection) -> str:
    """The file SQLite opened for the main database (symlinks resolved, as it resolves them)."""
    return next(row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main")


def create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 when it does not exist, so the memory (and the WAL and
    shared-memory files SQLite gives the same mode) is never readable by other local users."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
