"""``SocketEmbedder``: the ``Embedder`` port answered by the index owner's model over its socket.

An in-process model (``EMBEDDER=local`` or ``sentence-transformers``) costs a copy of its weights
in every process that loads it. The index host loads it anyway (it embeds the documents), so an
HTTP process asks the host to embed its queries instead of loading a copy of its own: one model
per service, whatever ``WORKERS`` is. The host encodes them in its query lane (``EncodeLane``),
ahead of any document batch still waiting.

The connection is the process's ``SocketVectorIndex`` (one per process, calls answered out of
order). While the host does not answer (starting, restarting, hung), ``embed`` raises
``EmbeddingError`` within ``timeout`` seconds (a reconnect included), as an embedding service
that is down does, and at once while the host's model loads: searches then answer from keywords.
``probe`` reports the host's model: "starting" while it loads (and while the host has not
answered since this process started, for ``STARTING_SECONDS``), and the reason when it cannot
answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from adapters.embedders.common import EmbedderFacts, validated_vectors
from adapters.ipc.client import SocketVectorIndex
from domain.errors import EmbeddingError, VectorIndexError
from ports.embedder import EmbedderStatus

log = logging.getLogger("nexusai.embedder")

STARTING_SECONDS = 60.0  # a host not yet heard from is "starting" this long, then "down"


class SocketEmbedder(EmbedderFacts):
    while_loading = "searches answer from keywords meanwhile"  # the host answers at once (``_Queries``)

    def __init__(self, client: SocketVectorIndex, model: str, dimension: int, max_batch: int = 16, *,
                 timeout: float = 30.0, starting_seconds: float = STARTING_SECONDS) -> None:
        self._client = client
        self._model, self._dimension, self._max_batch = model, dimension, max_batch
        self._timeout = timeout
        self._starting_until = time.monotonic() + starting_seconds
        self._answered = False  # the host has answered since this process started

    @property
    def where(self) -> str:
        return "in the index host"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            raw = await self._client.ask("embed", list(texts), timeout=self._timeout)
        except VectorIndexError as exc:
            raise EmbeddingError(f"local model {self._model!r} in the index host: {exc.message}") from None
        self._answered = True
        return validated_vectors(raw, expected_count=len(texts), dimension=self._dimension,
                                 source=f"local model {self._model!r} in the index host")

    async def probe(self) -> EmbedderStatus:
        """The host's own probe ("starting" while its model loads); never raises."""
        try:
            found: EmbedderStatus = await self._client.ask("embedder_probe", timeout=self._timeout)
        except (VectorIndexError, EmbeddingError) as exc:
            starting = not self._answered and time.monotonic() < self._starting_until
            why = "waiting for the index host (it loads the model)" if starting else "the index host does not answer"
            return EmbedderStatus(reachable=False, model=self._model, dimension=self._dimension,
                                  error=" ".join(f"local model {self._model!r}: {why}: {exc.message}".split()),
                                  starting=starting)
        self._answered = True
        return EmbedderStatus(reachable=found.reachable, model=self._model, dimension=self._dimension,
                              error=found.error, starting=found.starting)


def owner_operations(embedder: Any) -> dict[str, Callable[..., Awaitable[Any]]]:
    """What the owner's ``IndexServer`` answers a ``SocketEmbedder`` with: ``embed`` (``_Queries``)
    and its embedder's ``probe``; nothing without an embedder."""
    if embedder is None:
        return {}
    return {"embed": _Queries(embedder).embed, "embedder_probe": embedder.probe}


class _Queries:
    """The owner's side of a follower's ``embed``: its embedder's ``embed_query`` (an in-process
    model's query lane; ``embed`` elsewhere).

    A query never waits for the model to load (seconds, on a cold start or a restarted host):
    while it loads the answer is an ``EmbeddingError`` at once, and the follower's search answers
    from keywords meanwhile, as it does while no host answers. A failure (a model that did not
    load fails every query alike) is logged here once, and again only when it changes; each
    follower gets it as its answer."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self._encode = getattr(embedder, "embed_query", embedder.embed)
        self._logged: str | None = None  # the failure last logged

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if getattr(self._embedder, "starting", False):
            raise EmbeddingError(f"local model {self._embedder.model!r} is loading in the index host")
        try:
            return await self._encode(texts)
        except EmbeddingError as exc:
            if exc.message != self._logged:
                self._logged = exc.message
                log.warning("embedder: followers' queries fail (their searches answer from keywords): %s",
                            exc.message)
            raise
