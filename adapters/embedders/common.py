"""What every embedder adapter shares: checking returned vectors, batching, the health probe."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Protocol

from domain.errors import EmbeddingError
from ports.embedder import EmbedderStatus

PROBE_TEXT = "memory service health probe"


def validated_vectors(
    raw: object, *, expected_count: int, dimension: int, source: str
) -> list[list[float]]:
    """Return ``raw`` as ``expected_count`` vectors of ``dimension`` finite floats, or raise.

    ``source`` names where the vectors came from (a URL, a model) so that the error says so.
    """
    if not isinstance(raw, list):
        raise EmbeddingError(f"{source}: expected a list of vectors, got {type(raw).__name__}")
    if len(raw) != expected_count:
        raise EmbeddingError(
            f"{source}: asked for {expected_count} embeddings, got {len(raw)}"
        )
    vectors: list[list[float]] = []
    for position, vector in enumerate(raw):
        vectors.append(_validated_vector(vector, dimension=dimension, source=source, position=position))
    return vectors


def _validated_vector(vector: object, *, dimension: int, source: str, position: int) -> list[float]:
    if not isinstance(vector, list | tuple):
        raise EmbeddingError(
            f"{source}: embedding {position} is a {type(vector).__name__}, not a list of floats"
        )
    if len(vector) != dimension:
        raise EmbeddingError(
            f"{source}: embedding {position} has {len(vector)} dimensions, expected {dimension} "
            "(check EMBEDDING_DIM against the model)"
        )
    floats: list[float] = []
    for value in vector:
        # bool is an int subclass; a vector of true/false is a broken server, not a vector.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EmbeddingError(f"{source}: embedding {position} holds a non-number {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise EmbeddingError(f"{source}: embedding {position} holds a non-finite value {value!r}")
        floats.append(number)
    return floats


def batches(texts: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    """Split ``texts`` into consecutive slices of at most ``size``."""
    for start in range(0, len(texts), size):
        yield texts[start : start + size]


class _Embeds(Protocol):
    @property
    def model(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


async def probe_by_embedding(
    embedder: _Embeds, embed: Callable[[Sequence[str]], Awaitable[list[list[float]]]] | None = None
) -> EmbedderStatus:
    """Embed one short text (with ``embed``, the embedder's own by default) and report the
    outcome; never raises."""
    try:
        await (embed or embedder.embed)([PROBE_TEXT])
    except EmbeddingError as error:
        return _down(embedder, error.message)
    except Exception as error:  # a probe reports, it never takes /health down with it
        return _down(embedder, f"{type(error).__name__}: {error}")
    return EmbedderStatus(reachable=True, model=embedder.model, dimension=embedder.dimension)


def _down(embedder: _Embeds, reason: str) -> EmbedderStatus:
    one_line = " ".join(reason.split()) or "unknown error"
    return EmbedderStatus(
        reachable=False, model=embedder.model, dimension=embedder.dimension, error=one_line
    )


class EmbedderFacts:
    """What every embedder shares: the read-only facts of the ``Embedder`` port (from the
    ``_model``, ``_dimension`` and ``_max_batch`` an adapter sets in its constructor), the
    default query embedding, probe and a no-op close."""

    _model: str
    _dimension: int
    _max_batch: int

    @property
    def model(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def start(self) -> None:
        """Nothing to prepare: remote backends are ready or not, which ``probe`` tells."""
        return None

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """A search's text is one more ``embed`` call: a remote backend has no queue of ours to
        put it first in (in-process models override this)."""
        return await self.embed(texts)  # type: ignore[attr-defined]

    async def probe(self) -> EmbedderStatus:
        """One real embedding of a short text (adapters with a cheaper check override this)."""
        return await probe_by_embedding(self)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """Nothing to release: HTTP embedders borrow the container's client."""
        return None
