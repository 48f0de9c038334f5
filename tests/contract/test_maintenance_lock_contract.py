"""The MaintenanceLock contract, over every adapter: two handles on one store, as two processes
serving it hold them; and, for the file lock, a holder killed with ``kill -9``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.memory.maintenance_lock import InMemoryMaintenanceLock, LockCell
from adapters.postgres.maintenance_lock import PostgresMaintenanceLock
from adapters.sqlite.maintenance_lock import SqliteMaintenanceLock
from ports.maintenance import MaintenanceLock


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def handles(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], MaintenanceLock]:
    """A maker of handles on one store's lock."""
    if request.param == "memory":
        cell = LockCell()
        return lambda: InMemoryMaintenanceLock(cell)
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        return lambda: PostgresMaintenanceLock(url)
    return lambda: SqliteMaintenanceLock(tmp_path / "memory.db")


_HOLD = {  # a process that takes the lock, says so, and holds it until killed
    "sqlite": "from adapters.sqlite.maintenance_lock import SqliteMaintenanceLock as Lock",
    "postgres": "from adapters.postgres.maintenance_lock import PostgresMaintenanceLock as Lock",
}


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


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_holder_killed_with_sigkill_leaves_the_lock_free(kind: str, request: pytest.FixtureRequest,
                                                                 tmp_path: Path) -> None:
    where = str(tmp_path / "memory.db") if kind == "sqlite" else request.getfixturevalue("postgres_url")
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import asyncio, sys; {_HOLD[kind]}; "
         f"lock = Lock({where!r}); assert asyncio.run(lock.try_acquire()); "
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    mine = (SqliteMaintenanceLock if kind == "sqlite" else PostgresMaintenanceLock)(where)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not await mine.try_acquire()
        assert await mine.holder() == holder.pid
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        # The server ends the dead client's session when it reads the closed socket: soon, not at once.
        for _ in range(600):
            if await mine.try_acquire():
                break
            await asyncio.sleep(0.05)
        assert mine.held
    finally:
        await mine.release()
        holder.kill()
        holder.wait()
