"""Writers of one SQLite file in several processes take turns by a file lock that wakes the next.

With ``WORKERS`` > 1 (and the index host beside them) several processes write one file. SQLite
serialises them with its own write lock, but a writer that finds it taken sleeps in SQLite's busy
handler on a fixed ladder (1, 2, 5, 10 … 100 ms) and is not woken when the lock frees: under a
write load the tail latency of POST /episodes reached seconds with two workers. ``WriterTurn``
takes an ``flock`` on ``<SQLITE_PATH>.writer`` around each group-commit transaction, so the next
writer in line gets its turn within a short poll of the previous commit. Waiting is bounded by the
same 5 s as SQLite's busy timeout: past it the writer goes on without the turn and SQLite's own
lock decides, as before (a stuck holder can never hang the writes). The kernel drops the lock of a
process that dies, even by ``kill -9``. Other programs writing the file are not affected: SQLite's
lock still orders everyone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time

log = logging.getLogger(__name__)

POLL_FIRST = 0.0002  # seconds between tries, doubling up to POLL_MAX
POLL_MAX = 0.002


class WriterTurn:
    def __init__(self, database_path: str, timeout: float) -> None:
        self.path = f"{database_path}.writer"
        self._timeout = timeout
        self._held = False
        self._unsupported = False
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:  # SQLite itself decides whether this database can be written
            log.warning("writers take no turns on %s (%s); SQLite's own lock orders them", self.path, exc)
            self._fd, self._unsupported = None, True

    def _try(self) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as exc:  # a file system without flock (ENOLCK, EOPNOTSUPP): SQLite's lock alone
            log.warning("writers take no turns on %s (%s); SQLite's own lock orders them", self.path, exc)
            self._unsupported = True
            return True
        self._held = True
        return True

    def __enter__(self) -> WriterTurn:
        if self._unsupported or self._try():
            return self
        deadline, delay = time.monotonic() + self._timeout, POLL_FIRST
        while time.monotonic() < deadline:
            time.sleep(delay)
            if self._try():
                return self
            delay = min(delay * 2, POLL_MAX)
        return self  # no turn within the timeout: SQLite's own lock and busy timeout decide

    def __exit__(self, *exc: object) -> None:
        self.release()

    def attempt(self) -> bool:
        """The turn if it is free at once (then ``release`` it), without waiting."""
        return self._unsupported or self._try()

    def release(self) -> None:
        if self._held:
            self._held = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class NoTurn:
    """An in-memory database has one writer in one process: no turns to take."""

    def __enter__(self) -> NoTurn:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def attempt(self) -> bool:
        return True

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass
