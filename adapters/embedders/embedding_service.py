"""EmbeddingServiceEmbedder: the NexusAI embedding service, ``POST {base_url}/embed``.

Single text: ``{"text": "..."}`` -> ``{"embedding": [...]}``. Newer services also take
``{"texts": [...]}`` -> ``{"embeddings": [[...]]}``; the adapter tries that first and, the first
time the service rejects it (400/404/422, or a 2xx body without ``embeddings``), remembers that
the service only speaks single texts and from then on sends one text per call, a bounded number
at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx

from adapters.embedders.common import (
    EmbedderFacts,
    batches,
    validated_vectors,
)
from adapters.embedders.http import JsonAnswer, field, ok_payload, post_json

# The statuses with which a service that predates batches says "I do not know `texts`".
_BATCH_REJECTED = frozenset({400, 404, 422})


class EmbeddingServiceEmbedder(EmbedderFacts):
    def __init__(
        self,
        base_url: str,
        dimension: int,
        client: httpx.AsyncClient,
        model: str = "embedding-service",
        max_batch: int = 32,
        max_concurrency: int = 8,
    ) -> None:
        self._url = base_url.rstrip("/") + "/embed"
        self._dimension = dimension
        self._client = client
        self._model = model
        self._max_batch = max_batch
        self._max_concurrency = max_concurrency
        # None until the service has shown whether it takes {"texts": [...]}.
        self.supports_batch: bool | None = None

    @property
    def url(self) -> str:
        return self._url

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for batch in batches(list(texts), self._max_batch):
            vectors.extend(await self._embed_batch(batch))
        return vectors


    async def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        if self.supports_batch is not False:
            answer = await post_json(self._client, self._url, {"texts": list(texts)})
            if self._is_batch_rejection(answer):
                self.supports_batch = False
            else:
                payload = ok_payload(answer)
                vectors = validated_vectors(
                    field(payload, "embeddings", self._url),
                    expected_count=len(texts),
                    dimension=self._dimension,
                    source=self._url,
                )
                self.supports_batch = True
                return vectors
        return await self._embed_one_by_one(texts)

    def _is_batch_rejection(self, answer: JsonAnswer) -> bool:
        if self.supports_batch:
            # Once batches worked, a 4xx is a real error, not a sign of an old service.
            return False
        if answer.status in _BATCH_REJECTED:
            return True
        return (
            200 <= answer.status < 300
            and answer.is_json
            and not (isinstance(answer.payload, dict) and "embeddings" in answer.payload)
        )

    async def _embed_one_by_one(self, texts: Sequence[str]) -> list[list[float]]:
        limit = asyncio.Semaphore(self._max_concurrency)

        async def one(text: str) -> list[float]:
            async with limit:
                answer = await post_json(self._client, self._url, {"text": text})
            payload = ok_payload(answer)
            return validated_vectors(
                [field(payload, "embedding", self._url)],
                expected_count=1,
                dimension=self._dimension,
                source=self._url,
            )[0]

        # TaskGroup cancels the sibling requests as soon as one fails.
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(text)) for text in texts]
        except* Exception as failures:
            raise failures.exceptions[0] from None
        return [task.result() for task in tasks]
