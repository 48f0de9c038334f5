"""An optional reranker through the API: a real TEI / OpenAI-compatible ``/rerank`` server
reorders a search's best hits; when it fails the ranker's order stands and the answer says so."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from app.main import create_app
from tests.support.rerank_server import RerankTestServer


def served(make_settings, server: RerankTestServer) -> TestClient:
    return TestClient(create_app(make_settings(worker_enabled=False, embedding_dim=256, reranker_url=server.url,
                                               reranker_api=server.wire, reranker_model="bge-reranker-base")))


def seeded(client: TestClient) -> dict[str, int]:
    sid = client.post("/sessions", json={"externalId": "s"}).json()["id"]
    ids = {}
    for name, text in {"cat": "cat", "both": "Miso the cat naps", "other": "the dog naps"}.items():
        ids[name] = client.post("/episodes", json={"sessionId": sid, "userMessage": text, "aiResponse": "ok"}).json()["id"]
    return ids | {"session": sid}


@pytest.mark.parametrize("wire", ["tei", "openai"])
def test_a_reranker_reorders_the_hits_and_its_score_is_the_hits_score(make_settings, wire) -> None:
    with RerankTestServer(wire) as server, served(make_settings, server) as client:
        ids = seeded(client)
        body = client.post("/search", json={"query": "Miso cat naps", "sessionId": ids["session"],
                                            "minScore": 0}).json()
        assert body["warnings"] == [] and body["hits"][0]["id"] == ids["both"]
        assert body["hits"][0]["score"] == 1.0  # all three words: the reranker's score
        sent = server.requests[-1]["body"]
        assert sent["query"] == "Miso cat naps"
        if wire == "tei":
            assert len(sent["texts"]) == 3
        else:
            assert sent["model"] == "bge-reranker-base" and len(sent["documents"]) == 3


def test_a_failing_reranker_leaves_the_rankers_order_and_a_warning(make_settings) -> None:
    with RerankTestServer("tei") as server, served(make_settings, server) as client:
        ids = seeded(client)
        server.mode = "error500"
        body = client.post("/search", json={"query": "Miso cat naps", "sessionId": ids["session"]}).json()
        assert body["hits"] and body["degraded"] is False
        assert any("reranker unavailable" in w and "HTTP 500" in w for w in body["warnings"])
