"""HttpReranker: the ``/rerank`` APIs of Hugging Face TEI and of OpenAI-compatible servers.

Two wire formats, as the servers speak them:

- ``tei`` (text-embeddings-inference): ``POST {url}/rerank`` ``{"query", "texts": [...],
  "raw_scores": false, "truncate": true}`` -> ``[{"index": i, "score": s}, ...]``, best first.
- ``openai`` (vLLM, llama.cpp's server, Jina and Cohere-style APIs): ``POST {url}/v1/rerank``
  ``{"model", "query", "documents": [...], "top_n": n}`` -> ``{"results": [{"index": i,
  "relevance_score": s}, ...]}``.

Both answer in score order, not input order, so scores are put back by ``index``. Every failure
is a ``DomainError`` naming the URL (the search keeps its own order and warns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import httpx

from adapters.embedders.http import field, ok_payload, post_json
from domain.errors import Unavailable

RerankApi = Literal["tei", "openai"]
QUERY_TIMEOUT = 5.0
"""Seconds a search waits for the reranker: it sits on the query path, and the ranker's own order
is a fine answer when it is slow."""
RERANK_APIS: tuple[str, ...] = ("tei", "openai")


def rerank_url(base_url: str, api: RerankApi) -> str:
    """The endpoint: ``{base}/rerank`` for TEI; ``{base}/v1/rerank`` (or ``{base}/rerank`` when the
    base already ends in ``/v1``) for OpenAI-compatible servers."""
    base = base_url.rstrip("/")
    if api == "tei" or base.endswith("/v1"):
        return base + "/rerank"
    return base + "/v1/rerank"


class HttpReranker:
    def __init__(self, base_url: str, api: RerankApi, client: httpx.AsyncClient, model: str | None = None,
                 api_key: str | None = None, timeout: float | None = None) -> None:
        self._api = api
        self._url = rerank_url(base_url, api)
        self._client = client
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._timeout = timeout  # a search waits this long at most; None: the client's own
        self.name = f"{api} reranker at {self._url}"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        if self._api == "tei":
            body: dict = {"query": query, "texts": list(texts), "raw_scores": False, "truncate": True}
        else:
            body = {"query": query, "documents": list(texts), "top_n": len(texts)}
            if self._model:
                body["model"] = self._model
        payload = ok_payload(await post_json(self._client, self._url, body, headers=self._headers, timeout=self._timeout))
        results = payload if self._api == "tei" else field(payload, "results", self._url)
        score_name = "score" if self._api == "tei" else "relevance_score"
        scores: list[float | None] = [None] * len(texts)
        if isinstance(results, list):
            for result in results:
                index = result.get("index") if isinstance(result, dict) else None
                score = result.get(score_name) if isinstance(result, dict) else None
                if isinstance(index, int) and 0 <= index < len(texts) and isinstance(score, (int, float)) \
                        and math.isfinite(score):
                    scores[index] = float(score)
        if any(score is None for score in scores):
            raise Unavailable(f"{self._url}: the answer lacks a {score_name!r} for some of the {len(texts)} texts")
        return [float(score) for score in scores if score is not None]
