"""``InMemoryMaintenanceLock``: the MaintenanceLock double, for a store only this process sees."""

from __future__ import annotations

import os


class LockCell:
    """The lock state of one in-memory store; every handle on that store shares it."""

    def __init__(self) -> None:
        self.owner: object | None = None


class InMemoryMaintenanceLock:
    def __init__(self, cell: LockCell | None = None) -> None:
        self._cell = cell or LockCell()

    @property
    def held(self) -> bool:
        return self._cell.owner is self

    async def try_acquire(self) -> bool:
        if self._cell.owner is None:
            self._cell.owner = self
        return self._cell.owner is self

    async def holder(self) -> int | None:
        return os.getpid() if self._cell.owner is not None else None

    async def release(self) -> None:
        if self._cell.owner is self:
            self._cell.owner = None
