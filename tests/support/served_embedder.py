"""An embedder served on a real index owner's socket, and the ``SocketEmbedder`` that reaches it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from adapters.ipc.client import SocketVectorIndex
from adapters.ipc.embedder import SocketEmbedder, owner_operations
from adapters.ipc.server import IndexServer
from adapters.memory.vector_index import InMemoryVectorIndex


@asynccontextmanager
async def served_embedder(embedder: Any, path: Path, **options: Any) -> AsyncIterator[SocketEmbedder]:
    """``embedder`` answered by an ``IndexServer`` at ``path`` (over an in-memory index, as the
    owner answers with its own); ``options`` go to the ``SocketEmbedder``."""
    server = IndexServer(InMemoryVectorIndex(), path, extras=owner_operations(embedder))
    await server.start()
    client = SocketVectorIndex(path)
    try:
        yield SocketEmbedder(client, embedder.model, embedder.dimension, embedder.max_batch, **options)
    finally:
        await client.close()
        await server.close()
