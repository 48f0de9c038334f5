"""``POST /search`` as the e2e tests ask it: an answer that must be 200, and whether it is hybrid."""

from __future__ import annotations

import httpx


def search(client: httpx.Client, query: str, timeout: float | None = None) -> dict:
    """The body of a 200 answer (``timeout``: the request's own, else the client's)."""
    extra = {} if timeout is None else {"timeout": timeout}
    response = client.post("/search", json={"query": query, "limit": 5}, **extra)
    assert response.status_code == 200, response.text
    return response.json()


def hybrid_hit(client: httpx.Client, query: str, episode_id: int) -> bool:
    """Not degraded, and ``episode_id`` among the hits with a vector leg."""
    body = search(client, query)
    hit = next((h for h in body["hits"] if h["id"] == episode_id), None)
    return not body["degraded"] and hit is not None and hit["vector"] is not None
