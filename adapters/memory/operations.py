"""Running the in-memory store: counts; no files, so no sizes; always writable."""

from __future__ import annotations

from adapters.memory.state import MemoryState


class MemoryOperations:
    def __init__(self, state: MemoryState) -> None:
        self._s = state

    async def counts(self) -> dict[str, int]:
        s = self._s
        return {"sessions": len(s.sessions), "episodes": len(s.episodes), "entities": len(s.entities),
                "relationships": len(s.relationships), "summaries": len(s.summaries),
                "embedding_outbox": len(s.outbox)}

    async def sizes(self) -> dict[str, int]:
        return {}

    async def health(self) -> str | None:
        return None

    async def close(self) -> None:
        return None
