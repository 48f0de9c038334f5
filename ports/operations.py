"""Running the store: how much it holds, what it costs on disk, whether it can write, closing it."""

from __future__ import annotations

from typing import Protocol


class StoreOperations(Protocol):
    async def counts(self) -> dict[str, int]:
        """Records held, by kind: ``sessions``, ``episodes``, ``entities``, ``relationships``,
        ``summaries`` and ``embedding_outbox`` (jobs, live and dead)."""
        ...

    async def sizes(self) -> dict[str, int]:
        """Bytes by part: ``database`` (the file's pages), ``embeddings`` (the stored vectors) and
        one ``<kind>_fts`` per keyword-indexed kind (the index's stored data: values, not pages);
        a store without files answers ``{}``."""
        ...

    async def health(self) -> str | None:
        """``None`` when the store can write (proved by a real write, not just a read), else a
        short description of the problem; never raises."""
        ...

    async def close(self) -> None:
        """Finish queued writes and release files (idempotent)."""
        ...
