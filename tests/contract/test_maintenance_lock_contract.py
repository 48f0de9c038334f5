"""The MaintenanceLock contract, over every adapter: two handles on one store, as two processes
serving it hold them; and, for the file lock, a holder killed with ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.memory.maintenance_lock import InMemoryMaintenanceLock, LockCell
from adapters.sqlite.maintenance_lock import SqliteMaintenanceLock
from ports.maintenance import MaintenanceLock


@pytest.fixture(params=["memory", "sqlite"])
def handles(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], MaintenanceLock]:
    """A maker of handles on one store's lock."""
    if request.param == "memory":
        cell = LockCell()
        return lambda: InMemoryMaintenanceLock(cell)
    return lambda: SqliteMaintenanceLock(tmp_path / "memory.db")


async def test_one_handle_holds_the_lock_and_another_cannot_take_it_meanwhile(handles) -> None:
    first, second = handles(), handles()
    assert await first.try_acquire() and first.held
    assert not await second.try_acquire() and not second.held
    assert await first.try_acquire()  # taking it again while held: still held
    assert await first.holder() == os.getpid()
    await first.release()
    assert not first.held
    assert await second.try_acquire()
    await second.release()


async def test_releasing_a_lock_not_held_is_a_no_op(handles) -> None:
    first, second = handles(), handles()
    await second.release()
    assert await first.try_acquire()
    await second.release()  # the other handle's release leaves the holder holding
    assert first.held and not await second.try_acquire()
    await first.release()


async def test_a_holder_killed_with_sigkill_leaves_the_lock_free(tmp_path: Path) -> None:
    database = tmp_path / "memory.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import asyncio, sys; from adapters.sqlite.maintenance_lock import SqliteMaintenanceLock; "
         f"lock = SqliteMaintenanceLock({str(database)!r}); assert asyncio.run(lock.try_acquire()); "
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        mine = SqliteMaintenanceLock(database)
        assert not await mine.try_acquire()
        assert await mine.holder() == holder.pid
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        assert await mine.try_acquire()
        await mine.release()
    finally:
        holder.kill()
        holder.wait()
