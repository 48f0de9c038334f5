"""FakeEmbedder: a deterministic, in-memory Embedder for tests, that can be told to fail.

Its vectors are the HashEmbedder's (so retrieval over them behaves sensibly); it records every
``embed`` call, failed ones included, and ``go_down()`` / ``recover()`` simulate an outage of
the embedding backend for write-path tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.embedders.common import EmbedderFacts
from adapters.embedders.hashing import hash_vector
from domain.errors import EmbeddingError
from ports.embedder import EmbedderStatus


class FakeEmbedder(EmbedderFacts):
    def __init__(self, dimension: int = 8, model: str = "fake", max_batch: int = 16) -> None:
        self._dimension = dimension
        self._model = model
        self._max_batch = max_batch
        self.calls: list[list[str]] = []
        # Texts of the calls that succeeded, in order: "embedded exactly once" is checked here.
        self.embedded: list[str] = []
        # When set, every embed raises it and probe reports unreachable.
        self.fail_with: Exception | None = None
        # Texts containing one of these markers are refused like an over-long input (HTTP 400).
        self.poison: dict[str, bool] = {}

    def refuse(self, marker: str, *, permanent: bool = True) -> None:
        """Fail every batch holding a text that contains ``marker``, while other batches succeed:
        a poison record (``permanent`` like a 400, else like a record that times the server out)."""
        self.poison[marker] = permanent

    def go_down(self, error: Exception | None = None) -> None:
        """Fail every call from now on, with ``error`` or an ``EmbeddingError``."""
        self.fail_with = error or EmbeddingError("fake embedder is down")

    def recover(self) -> None:
        self.fail_with = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []  # as every adapter: an empty batch never reaches the backend
        self.calls.append(list(texts))
        if self.fail_with is not None:
            raise self.fail_with
        for marker, permanent in self.poison.items():
            if any(marker in text for text in texts):
                raise EmbeddingError(f"fake embedder refuses input containing {marker!r}", permanent=permanent)
        self.embedded.extend(texts)
        return [hash_vector(text, self._dimension) for text in texts]

    async def probe(self) -> EmbedderStatus:
        if self.fail_with is not None:
            return EmbedderStatus(
                reachable=False,
                model=self._model,
                dimension=self._dimension,
                error=str(self.fail_with) or type(self.fail_with).__name__,
            )
        return EmbedderStatus(reachable=True, model=self._model, dimension=self._dimension)
