"""The ``Reranker`` port over every adapter: the in-memory double, and ``HttpReranker`` against a
real HTTP server speaking the TEI and the OpenAI-compatible ``/rerank`` wire formats."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from adapters.memory.reranker import WordOverlapReranker
from adapters.rerankers.http import HttpReranker, rerank_url
from domain.errors import DomainError
from tests.support.rerank_server import RerankTestServer


class Subject:
    """A reranker and a way to make its backend fail."""

    def __init__(self, reranker, fail) -> None:
        self.reranker = reranker
        self.fail = fail


@pytest.fixture(params=["memory", "tei", "openai"])
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    if request.param == "memory":
        reranker = WordOverlapReranker()
        yield Subject(reranker, lambda mode: setattr(reranker, "down", True))
        return
    with RerankTestServer(request.param) as server:
        async with httpx.AsyncClient(timeout=5) as client:
            yield Subject(HttpReranker(server.url, request.param, client, model="bge-reranker-base"),
                          lambda mode: setattr(server, "mode", mode))


TEXTS = ["the weather is grey", "my cat Miso likes tuna", "Miso the cat"]


async def test_scores_come_back_in_the_order_of_the_texts(subject: Subject) -> None:
    scores = await subject.reranker.rerank("cat Miso", TEXTS)
    assert len(scores) == 3 and scores[0] < scores[1] and scores[0] < scores[2]


async def test_no_texts_is_no_scores(subject: Subject) -> None:
    assert await subject.reranker.rerank("cat", []) == []


@pytest.mark.parametrize("mode", ["error500", "malformed", "partial"])
async def test_a_backend_that_cannot_answer_raises_a_domain_error(subject: Subject, mode: str) -> None:
    subject.fail(mode)
    with pytest.raises(DomainError):
        await subject.reranker.rerank("cat Miso", TEXTS)


def test_the_endpoint_follows_the_wire_format() -> None:
    assert rerank_url("http://h:8080/", "tei") == "http://h:8080/rerank"
    assert rerank_url("http://h:8000", "openai") == "http://h:8000/v1/rerank"
    assert rerank_url("http://h:8000/v1", "openai") == "http://h:8000/v1/rerank"
