"""The in-process model's lane: a query waits for at most the one document batch being encoded.

Real threads, the real packaged model; the order of turns is recorded, never timed.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from adapters.embedders.lane import EncodeLane
from adapters.embedders.local import LocalEmbedder
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from domain import writes
from domain.models import NewEpisode
from domain.ranking import RankedHit
from domain.retrieval import SearchQuery, SearchService


class RecordingLane(EncodeLane):
    """Records who took each turn; the first document turn is held until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []
        self.holding = threading.Event()
        self.release = threading.Event()

    @contextmanager
    def turn(self, *, query: bool) -> Iterator[None]:
        with super().turn(query=query):
            self.order.append("query" if query else "document")
            if not query and self.order.count("document") == 1:
                self.holding.set()
                self.release.wait(60)  # bounded: a broken test still ends
            yield


async def _until(check, what: str) -> None:
    for _ in range(6000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    return LocalEmbedder("all-MiniLM-L6-v2")


def test_a_waiting_query_goes_before_a_waiting_document_batch() -> None:
    lane = EncodeLane()
    order: list[str] = []
    first = threading.Event()
    done = threading.Event()

    def take(kind: str, hold: threading.Event | None = None) -> None:
        with lane.turn(query=kind == "query"):
            order.append(kind)
            if hold is not None:
                first.set()
                hold.wait(30)

    holder = threading.Thread(target=take, args=("document", done))
    holder.start()
    assert first.wait(30)
    documents = threading.Thread(target=take, args=("document",))
    documents.start()
    for _ in range(3000):
        if lane.documents_waiting == 1:
            break
        threading.Event().wait(0.01)
    query = threading.Thread(target=take, args=("query",))
    query.start()
    for _ in range(3000):
        if lane.queries_waiting == 1:
            break
        threading.Event().wait(0.01)
    assert (lane.documents_waiting, lane.queries_waiting) == (1, 1)
    done.set()
    for thread in (holder, documents, query):
        thread.join(30)

    assert order == ["document", "query", "document"]
    assert (lane.query_turns, lane.document_turns) == (1, 2)


async def test_a_query_waits_for_one_document_batch_not_the_whole_call(model: LocalEmbedder) -> None:
    lane = model.lane = RecordingLane()
    texts = [f"document number {index} about the harbour and its boats" for index in range(8 * model.max_batch)]
    documents = asyncio.create_task(model.embed(texts))  # one worker call: 8 batches
    await _until(lane.holding.is_set, "the first document batch to take the model")
    query = asyncio.create_task(model.embed_query(["where are the boats?"]))
    await _until(lambda: lane.queries_waiting == 1, "the query to wait for its turn")
    lane.release.set()

    (vector,) = await query
    vectors = await documents

    assert lane.order == ["document", "query"] + ["document"] * 7
    assert len(vector) == model.dimension and len(vectors) == len(texts)
    # The lane changes the order of work, not its result.
    (alone,) = await model.embed_query([texts[-1]])
    assert alone == pytest.approx(vectors[-1], abs=1e-5)


async def test_a_query_reaches_the_lane_while_document_calls_fill_the_shared_threads(model: LocalEmbedder) -> None:
    # The loop's default executor is shared (SQLite, the worker's 4 concurrent embed calls): a
    # query queued there behind document calls would never get to ask for its turn.
    lane = model.lane = RecordingLane()
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(1))
    texts = [f"document {index} on the lighthouse keeper's log" for index in range(2 * model.max_batch)]
    first = asyncio.create_task(model.embed(texts))
    await _until(lane.holding.is_set, "the first document call to take the model")
    second = asyncio.create_task(model.embed(texts))  # queued: the one shared thread is taken
    query = asyncio.create_task(model.embed_query(["who keeps the lighthouse?"]))
    await _until(lambda: lane.queries_waiting == 1, "the query to wait for its turn")
    lane.release.set()

    await asyncio.gather(first, second, query)

    assert lane.order[:2] == ["document", "query"]
    assert lane.order.count("document") == 4


def test_a_steady_stream_of_queries_lets_a_waiting_document_through_after_a_few_turns() -> None:
    import threading as _threading

    from adapters.embedders.lane import QUERY_STREAK

    lane, order, stop = EncodeLane(), [], _threading.Event()
    first = _threading.Event()

    def queries() -> None:  # two threads, each asking again at once: a query always waits
        while not stop.is_set():
            with lane.turn(query=True):
                # Whether the document waits is read in the turn, not timed from outside: how soon
                # the document's thread starts waiting depends on the scheduler.
                order.append("query after the document waits" if lane.documents_waiting else "query")
                first.set()
                stop.wait(0.001)

    def document() -> None:
        with lane.turn(query=False):
            order.append("document")

    askers = [_threading.Thread(target=queries) for _ in range(2)]
    for thread in askers:
        thread.start()
    first.wait(5)
    doc = _threading.Thread(target=document)
    doc.start()
    doc.join(10)
    stop.set()
    for thread in askers:
        thread.join(10)
    assert not doc.is_alive()
    # Once it waits, the document goes within QUERY_STREAK query turns (+1: a turn taken just before
    # it began to wait may read it waiting).
    passed = order[:order.index("document")].count("query after the document waits")
    assert passed <= QUERY_STREAK + 1


# -- a search over the real model --------------------------------------------------------------


class InKeyOrder:
    """A ranker that keeps the candidates in key order: these tests are about the query vector."""

    name = "in-key-order"
    description = "candidates in key order"
    needs_vectors = False
    context_window = 0

    def rank(self, request):
        return [RankedHit(key, 1.0) for key in sorted(request.candidates)][: request.limit]

    def get(self, name: str):
        return self


async def _search_service(model: LocalEmbedder, query_timeout: float | None):
    store, index = MemoryStore(), InMemoryVectorIndex()
    session = await store.uow.run(lambda tx: writes.create_session(tx, "harbour", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(session.id, "the boats came back to the harbour at dusk", "ok"),
    ]))
    await index.ensure_collection("episodes", model.dimension)
    ranker = InKeyOrder()
    return SearchService(store, index, model, ranker, ranker.name, query_timeout=query_timeout)


async def test_a_search_embeds_its_query_in_the_query_lane(model: LocalEmbedder) -> None:
    lane = model.lane = RecordingLane()
    service = await _search_service(model, query_timeout=60.0)
    result = await service.search(SearchQuery("boats in the harbour", min_score=0.0))
    assert lane.order == ["query"] and not result.degraded


async def test_a_search_whose_query_vector_does_not_come_answers_from_keywords_degraded(
        model: LocalEmbedder) -> None:
    # A document pass holds the model and does not end (a stalled model): the query's turn never
    # comes. The search must answer anyway, from the keyword leg, and say why.
    lane = model.lane = RecordingLane()
    documents = asyncio.create_task(model.embed(["a pass that stalls"]))
    await _until(lane.holding.is_set, "the document pass to take the model")
    service = await _search_service(model, query_timeout=0.3)
    try:
        result = await service.search(SearchQuery("boats in the harbour", min_score=0.0))
    finally:
        lane.release.set()
        await documents
    assert result.degraded
    assert [hit.item.user_message for hit in result.hits] == ["the boats came back to the harbour at dusk"]
    assert any("no vector within 0.3 s" in warning for warning in result.warnings), result.warnings
