"""The container owns lifecycles: what a command or the app takes through a ``*_resource``
provider is closed by ``shutdown`` (dependency-injector's ``shutdown_resources``), most dependent
first, each close attempted; what was never taken is never built; metrics observe search through
the hook the container hands SearchService."""

from __future__ import annotations

import asyncio
import logging

from app.container import build_container, opened, shutdown
from domain.retrieval import SearchQuery


def _record_closes(container, order: list[str]) -> None:
    """Wrap the real close methods of the real adapters so the order they run in is seen."""
    for name, provider, method in (("index manager", container.index_manager, "close"),
                                   ("vector index", container.vector_index, "close"),
                                   ("embedder", container.embedder, "aclose"),
                                   ("http client", container.http_client, "aclose"),
                                   ("store", container.store, "close")):
        thing = provider()
        original = getattr(thing, method)

        async def close(original=original, name=name):
            order.append(name)
            await original()

        setattr(thing, method, close)


def test_a_store_only_command_builds_and_closes_only_the_store(make_settings):
    async def run():
        async with opened(make_settings()) as container:
            store = await container.store_resource()
            assert await store.operations.health() is None
        return container, store

    container, store = asyncio.run(run())
    assert not container.store_resource.initialized  # shut down
    for lifecycle in (container.embedder_resource, container.index_manager_resource, container.vector_index_resource,
                      container.http_client_resource, container.worker_running, container.health_running):
        assert not lifecycle.initialized
    assert asyncio.run(store.operations.health()) is not None  # closed: it says so instead of answering


def test_shutdown_closes_the_most_dependent_first(make_settings):
    async def run():
        container = build_container(make_settings())
        order: list[str] = []
        _record_closes(container, order)
        await container.store_resource()
        manager = await container.index_manager_resource()
        await manager.start()
        await container.worker_running()
        await shutdown(container)
        return order

    order = asyncio.run(run())
    assert set(order) == {"index manager", "vector index", "embedder", "http client", "store"}
    assert order[0] == "index manager"
    assert order.index("vector index") < order.index("store")
    assert order.index("embedder") < order.index("http client")


def test_a_failing_close_is_logged_and_the_others_still_run(make_settings, caplog):
    async def run():
        container = build_container(make_settings())
        order: list[str] = []
        _record_closes(container, order)
        index = container.vector_index()

        async def broken() -> None:
            raise OSError("disk went away")

        index.close = broken
        await container.index_manager_resource()
        await shutdown(container)
        return order

    with caplog.at_level(logging.ERROR, logger="nexusai.app"):
        order = asyncio.run(run())
    assert "store" in order and "index manager" in order and "embedder" in order
    assert any("closing the vector index failed" in r.getMessage() for r in caplog.records)


def test_search_legs_reach_the_metrics_through_the_hook_the_container_wires(make_settings):
    container = build_container(make_settings())
    metrics, search = container.metrics(), container.search()
    assert search.observe_leg == metrics.observe_leg

    async def run():
        await container.store_resource()
        await (await container.index_manager_resource()).start()
        await search.search(SearchQuery(query="anything at all"))
        await shutdown(container)

    asyncio.run(run())
    observed = metrics.registry.get_sample_value("memory_search_leg_duration_seconds_count", {"leg": "keyword"})
    assert observed == 1
