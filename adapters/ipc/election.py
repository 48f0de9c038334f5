"""Which worker process owns the vector index: an ``flock`` on a file beside the store.

The holder opens the index (an embedded engine has one opener only), runs the embedding worker
and serves the others over the index socket. The kernel drops the lock when the holder dies, even
by ``kill -9``, so a survivor's next ``try_acquire`` wins and takes the role over. The file holds
the owner's pid for people reading it; the lock, not the text, is what counts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


class OwnerLock:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock without waiting; True when this process now holds it (or already did)."""
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

    def holder(self) -> int | None:
        """The pid the current (or last) owner wrote, for messages; None when unknown."""
        try:
            return int(Path(self.path).read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
