"""``SqliteMaintenanceLock``: who maintains the vector index of a SQLite store, by ``flock``.

The lock is an ``flock`` on ``<SQLITE_PATH>.lock``, not on the database file: SQLite's own locks
are POSIX record locks, which a process loses when it closes *any* descriptor of the file, so a
descriptor of our own on the database could silently drop them. The kernel releases an ``flock``
when its holder dies, even by ``kill -9``. The file holds the holder's pid for people and
messages; the lock, not the text, is what counts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

SUFFIX = ".lock"


class SqliteMaintenanceLock:
    def __init__(self, database_path: str | Path) -> None:
        self.path = f"{database_path}{SUFFIX}"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    async def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    async def holder(self) -> int | None:
        try:
            return int(Path(self.path).read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    async def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
