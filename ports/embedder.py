"""The Embedder port: turn texts into fixed-size vectors for the vector index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class EmbedderStatus:
    """What ``Embedder.probe`` found; ``GET /health`` and ``memory-service doctor`` show it.

    ``reachable`` is true only when the backend answered a real embedding of ``dimension`` floats;
    otherwise ``error`` says why in one line (naming the URL or model where there is one).
    ``starting`` is true while the backend is still getting ready (an in-process model loading):
    not reachable yet, but not a fault either.
    """

    reachable: bool
    model: str
    dimension: int
    error: str | None = None
    starting: bool = False


class Embedder(Protocol):
    """An embedding backend (HTTP service, Ollama, OpenAI-compatible server, local model, hashing).

    ``model`` names the model for logs and health; ``dimension`` is the size of every vector
    returned, and must equal the size of the vector collections (EMBEDDING_DIM). ``max_batch`` is
    how many texts the embedding worker should hand to one ``embed`` call to use the backend
    well; ``embed`` accepts more and splits them itself.
    """

    @property
    def model(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_batch(self) -> int: ...

    def start(self) -> None:
        """Begin any slow preparation (loading a model) in the background; returns at once.

        Contract: idempotent; ``embed`` works whether or not it was called (it waits for the
        preparation off the event loop); ``probe`` meanwhile reports ``starting``.
        """
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed a batch of texts.

        Contract: returns exactly one vector per text, in the order of ``texts``, each a list of
        ``dimension`` finite floats; an empty input returns ``[]`` without touching the backend;
        the same text gives the same vector (within float tolerance) on every call; any text,
        including the empty string and non-ASCII, is accepted. Every failure (unreachable,
        timeout, an error status, a malformed body, a vector of the wrong size, a missing model)
        raises ``domain.errors.EmbeddingError`` with a message naming what failed; nothing else
        escapes.
        """
        ...

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed a search's text: what a caller is waiting for right now.

        Contract: the same vectors as ``embed`` for the same texts, and the same errors. A backend
        shared with the embedding worker (an in-process model) serves it before any document batch
        still waiting, so a backlog of new memories does not slow a search down; an HTTP backend,
        with no queue of its own, embeds it like any other batch.
        """
        ...

    async def probe(self) -> EmbedderStatus:
        """Check the backend with one real embedding; never raises.

        Contract: ``reachable`` is true exactly when an ``embed`` of one short text would
        succeed right now; when false, ``error`` is a non-empty one-line reason. ``model`` and
        ``dimension`` are the configured ones. It answers at once while the backend is
        ``starting`` (it never waits for a model to load).
        """
        ...

    async def aclose(self) -> None:
        """Release what the embedder holds (a loaded model); idempotent.

        An HTTP embedder does not close the shared ``httpx.AsyncClient`` it was given: the
        container that created the client closes it.
        """
        ...
