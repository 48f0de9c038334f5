"""OllamaEmbedder: Ollama's batched embedding API, ``POST {base_url}/api/embed``.

Request ``{"model": "nomic-embed-text", "input": ["...", ...]}``; response
``{"model": ..., "embeddings": [[...], ...], "total_duration": ..., "load_duration": ...,
"prompt_eval_count": ...}`` with the vectors in input order. (The older ``/api/embeddings``
endpoint takes one ``prompt`` per call and is not used.) Ollama reports errors as
``{"error": "..."}``, e.g. 404 for a model that has not been pulled.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from adapters.embedders.common import (
    EmbedderFacts,
    batches,
    validated_vectors,
)
from adapters.embedders.http import field, ok_payload, post_json


class OllamaEmbedder(EmbedderFacts):
    def __init__(
        self,
        base_url: str,
        dimension: int,
        client: httpx.AsyncClient,
        model: str = "nomic-embed-text",
        max_batch: int = 64,
    ) -> None:
        self._url = base_url.rstrip("/") + "/api/embed"
        self._dimension = dimension
        self._client = client
        self._model = model
        self._max_batch = max_batch

    @property
    def url(self) -> str:
        return self._url

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for batch in batches(list(texts), self._max_batch):
            answer = await post_json(
                self._client, self._url, {"model": self._model, "input": list(batch)}
            )
            vectors.extend(
                validated_vectors(
                    field(ok_payload(answer), "embeddings", self._url),
                    expected_count=len(batch),
                    dimension=self._dimension,
                    source=f"{self._url} (model {self._model})",
                )
            )
        return vectors
