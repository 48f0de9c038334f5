"""Writers of one SQLite file in several processes take turns by a file lock that wakes the next.

With ``WORKERS`` > 1 (and the index host beside them) several processes write one file. SQLite
serialises them with its own write lock, but a writer that finds it taken sleeps in SQLite's busy
handler on a fixed ladder (1, 2, 5, 10 … 100 ms) and is not woken when the lock frees: under a
write load the tail latency of POST /episodes reached seconds with two workers. ``WriterTurn``
takes an ``flock`` on ``<SQLITE_PATH>.writer`` around each group-commit transaction. A writer
that finds the turn taken hands the wait to a waiter thread blocked in ``flock`` on a descriptor
of its own, which the kernel wakes the moment the turn is released (a poll, 0.2 → 2 ms between
tries, left the turn idle for up to 2 ms after each commit while the lock was the bottleneck of
the write path: round 8). Waiting is bounded by the same 5 s as SQLite's busy timeout: past it
the writer goes on without the turn and SQLite's own lock decides, as before (a stuck holder can
never hang the writes), and a turn the waiter gets after its writer stopped waiting is let go at
once, or handed to the writer's next wait. The kernel drops the lock of a process that dies, even
by ``kill -9``. Other programs writing the file are not affected: SQLite's lock still orders
everyone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading

log = logging.getLogger(__name__)


class WriterTurn:
    def __init__(self, database_path: str, timeout: float) -> None:
        self.path = f"{database_path}.writer"
        self._timeout = timeout
        self._held: int | None = None  # the descriptor the turn is held through
        self._unsupported = False
        self._waiter: _Waiter | None = None
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
        self._held = self._fd
        return True

    def __enter__(self) -> WriterTurn:
        if self._unsupported or self._try():
            return self
        if self._waiter is None or not self._waiter.alive:
            try:
                self._waiter = _Waiter(self.path)
            except (OSError, RuntimeError) as exc:  # no descriptor or thread: SQLite's own lock decides
                log.warning("no waiter for the writer turn on %s (%s)", self.path, exc)
                return self
        self._held = self._waiter.take(self._timeout)
        return self  # None held: no turn within the timeout, SQLite's own lock and busy timeout decide

    def __exit__(self, *exc: object) -> None:
        self.release()

    def attempt(self) -> bool:
        """The turn if it is free at once (then ``release`` it), without waiting."""
        return self._unsupported or self._try()

    def release(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            fcntl.flock(held, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._waiter is not None:
            self._waiter.close()
            self._waiter = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Waiter:
    """A thread blocked in ``flock`` for its writer, on its own descriptor (a lock of its own: a
    writer that stopped waiting and then took the turn through its descriptor is never also handed
    one the waiter got)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        self._state = threading.Condition()
        self._wanted = self._got = self._failed = self._closed = False
        self._thread = threading.Thread(target=self._run, name="sqlite-writer-turn", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            os.close(self.fd)
            raise

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def take(self, timeout: float) -> int | None:
        """Its descriptor once the turn is got through it, None past ``timeout`` (or if it fails)."""
        with self._state:
            self._wanted, self._got, self._failed = True, False, False
            self._state.notify_all()
            self._state.wait_for(lambda: self._got or self._failed, timeout)
            got, self._wanted, self._got = self._got, False, False
            return self.fd if got else None  # not got: the waiter lets the turn go when it gets it

    def _run(self) -> None:
        try:
            self._serve()
        except Exception:  # a bug here must not leave writers waiting out their timeout
            log.exception("the writer turn's waiter failed; the next contended write starts another")
        finally:  # whatever ends it: a writer waiting now goes on at once (and the next one gets a new waiter)
            with self._state:
                self._failed = True
                self._state.notify_all()
            os.close(self.fd)  # closed here, never while this thread may be inside flock on it

    def _serve(self) -> None:
        while True:
            with self._state:
                self._state.wait_for(lambda: self._wanted or self._closed)
                if self._closed:
                    break
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            except OSError as exc:
                log.warning("waiting for the writer turn failed (%s); SQLite's own lock orders this write", exc)
                with self._state:
                    self._wanted, self._failed = False, True
                    self._state.notify_all()
                continue
            with self._state:
                if self._wanted and not self._closed:
                    self._wanted, self._got = False, True  # handed over: not wanted again until asked
                    self._state.notify_all()
                    continue
            fcntl.flock(self.fd, fcntl.LOCK_UN)  # its writer stopped waiting

    def close(self) -> None:
        with self._state:
            self._closed = True
            self._state.notify_all()


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
