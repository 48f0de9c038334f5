"""The MaintenanceLock port: which process maintains a store's vector index.

Several processes may serve one store (uvicorn workers over a shared SQLite file or PostgreSQL,
with a Qdrant server as the index). Every one of them embeds and writes vectors — an upsert twice
is harmless — but verification, repair, rebuilds and generation switches are done by one at a
time: the holder of this lock, which also sweeps expired records (and, on SQLite, alone drains
the embedding outbox; on PostgreSQL every process does, by claims). The holder keeps it for as
long as it runs; the lock is dropped when the holder dies, whatever way it dies, so another
process takes the maintenance over. The command-line tools read it too: while a service holds
it, they never open the index themselves.
"""

from __future__ import annotations

from typing import Protocol


class MaintenanceLock(Protocol):
    @property
    def held(self) -> bool:
        """True while this handle holds the lock."""
        ...

    async def try_acquire(self) -> bool:
        """Take the lock without waiting. True when this handle now holds it (or already did);
        False while any other handle on the same store holds it, in this process or another."""
        ...

    async def holder(self) -> int | None:
        """The process id of the current (or last) holder, for messages; None when unknown."""
        ...

    async def release(self) -> None:
        """Let the lock go; releasing a lock not held is a no-op."""
        ...
