"""OpenAIEmbedder: the OpenAI embeddings API and the servers that copy it.

``POST {base_url}/v1/embeddings`` with ``{"model": ..., "input": [...], "encoding_format":
"float"}``; the answer is ``{"object": "list", "data": [{"object": "embedding", "index": i,
"embedding": [...]}, ...], "model": ..., "usage": {...}}``. vLLM, llama.cpp's server, LM Studio,
Hugging Face TEI and OpenAI itself speak it. ``data`` is put in order by ``index`` because the
API does not promise list order. ``encoding_format`` is sent explicitly since some clients and
servers default to base64.
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
from domain.errors import EmbeddingError


def embeddings_url(base_url: str) -> str:
    """``http://h:8000`` and ``http://h:8000/v1`` both mean ``http://h:8000/v1/embeddings``."""
    base = base_url.rstrip("/")
    return base + ("/embeddings" if base.endswith("/v1") else "/v1/embeddings")


class OpenAIEmbedder(EmbedderFacts):
    def __init__(
        self,
        base_url: str,
        model: str,
        dimension: int,
        client: httpx.AsyncClient,
        api_key: str | None = None,
        max_batch: int = 64,
    ) -> None:
        self._url = embeddings_url(base_url)
        self._model = model
        self._dimension = dimension
        self._client = client
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._max_batch = max_batch

    @property
    def url(self) -> str:
        return self._url

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for batch in batches(list(texts), self._max_batch):
            body = {"model": self._model, "input": list(batch), "encoding_format": "float"}
            answer = await post_json(self._client, self._url, body, headers=self._headers)
            data = field(ok_payload(answer), "data", self._url)
            vectors.extend(
                validated_vectors(
                    self._in_index_order(data, len(batch)),
                    expected_count=len(batch),
                    dimension=self._dimension,
                    source=f"{self._url} (model {self._model})",
                )
            )
        return vectors


    def _in_index_order(self, data: object, count: int) -> list[object]:
        if not isinstance(data, list) or len(data) != count:
            size = len(data) if isinstance(data, list) else type(data).__name__
            raise EmbeddingError(f"{self._url}: asked for {count} embeddings, 'data' holds {size}")
        by_index: dict[int, object] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
                raise EmbeddingError(f"{self._url}: a 'data' item has no valid 'index': {str(item)[:120]}")
            by_index[index] = field(item, "embedding", self._url)
        if len(by_index) != count:
            raise EmbeddingError(f"{self._url}: 'data' repeats an index")
        return [by_index[index] for index in range(count)]
