"""The composition root: one container that turns ``Settings`` into adapters and services.

Nothing is built at import time; ``build_container(settings)`` wires a fresh container and the
app factory (or a CLI command, or a test) asks it for what it needs. Adapters are chosen with
``providers.Selector`` from configuration; tests swap any of them with ``provider.override``.

Lifecycles belong to the container. What holds files, models, connections or tasks has a
``*_resource`` provider next to its ``Singleton``: awaiting it gives the same object and makes the
container responsible for it, and ``await shutdown(container)`` (dependency-injector's
``shutdown_resources``) closes exactly what was taken that way, most dependent first (a resource
names the ones that must outlive it), each close attempted and its failure logged. Services keep
taking plain objects, so a CLI command that needs only the store opens only the store.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from operator import attrgetter

from dependency_injector import containers, providers

from adapters.embedders.embedding_service import EmbeddingServiceEmbedder
from adapters.embedders.hashing import HashEmbedder
from adapters.embedders.http import make_http_client
from adapters.embedders.ollama import OllamaEmbedder
from adapters.embedders.openai import OpenAIEmbedder
from adapters.memory.catalog import InMemoryIndexCatalog
from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.maintenance_lock import InMemoryMaintenanceLock
from adapters.memory.store import MemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.sqlite.catalog import SqliteIndexCatalog
from adapters.sqlite.maintenance_lock import SqliteMaintenanceLock
from adapters.sqlite.store import SqliteStore
from app.config import Settings
from app.plugins import RankerRegistry, get_plugin_manager
from domain.context import ContextService
from domain.feed import EventService, HistoryService
from domain.index_manager import IndexManager
from domain.freshness import ReadYourWrites
from domain.indexing import IndexingService
from domain.keys import KeyService
from domain.ranking import RankerConfig
from domain.retrieval import SearchService
from domain.services import EntityService, EpisodeService, ExpiryService, SessionService, SummaryService, UserService

log = logging.getLogger("nexusai.app")


def _edge_index(path: str, s: Settings):
    from adapters.qdrant.edge import QdrantEdgeIndex  # the engine loads only when chosen

    return QdrantEdgeIndex(
        path, optimize_every=s.index_optimize_every, inline_optimize_points=s.index_inline_build_points,
        disk_reserve_bytes=s.index_disk_reserve_mb * 2**20,
    )


def _catalog(store):
    # The manifest and stored embeddings live beside the records, in the same store (tests
    # override the store provider, so this follows the store actually built).
    if isinstance(store, SqliteStore):
        return SqliteIndexCatalog(store.database)
    if type(store).__name__ == "PostgresStore":  # imported only when chosen (psycopg loads with it)
        from adapters.postgres.catalog import PostgresIndexCatalog

        return PostgresIndexCatalog(store.database)
    return InMemoryIndexCatalog(store)


def _postgres_store(url: str, event_retention: int):
    from adapters.postgres.store import PostgresStore  # the driver loads only when chosen

    return PostgresStore.open(url, event_retention)


def _api_keys(store):
    # Keys live in the records' store (its ``api_keys`` table); the in-memory store's double beside it.
    if isinstance(store, SqliteStore):
        from adapters.sqlite.api_keys import SqliteApiKeys

        return SqliteApiKeys(store.database)
    if type(store).__name__ == "PostgresStore":  # imported only when chosen (psycopg loads with it)
        from adapters.postgres.api_keys import PostgresApiKeys

        return PostgresApiKeys(store.database)
    from adapters.memory.api_keys import InMemoryApiKeys

    return InMemoryApiKeys()


def _authenticator(keys, bootstrap: str | None, default_rate: float, cache_seconds: float):
    from app.auth import Authenticator  # litestar: only the app needs it

    return Authenticator(keys, bootstrap, default_rate=default_rate, cache_seconds=cache_seconds)


def _maintenance_lock(s: Settings):
    # Every process serving one store meets on the same lock (building it opens nothing).
    if s.store == "sqlite" and s.sqlite_path not in ("", ":memory:"):
        return SqliteMaintenanceLock(s.sqlite_path)
    if s.store == "postgres" and s.vector_index == "server":
        # Replicas sharing a Qdrant server maintain it one at a time; an index private to each
        # process (memory, edge) is maintained by that process, with the lock of its own below.
        from adapters.postgres.maintenance_lock import PostgresMaintenanceLock  # psycopg loads only when chosen

        return PostgresMaintenanceLock(s.database_url)
    return InMemoryMaintenanceLock()  # a store no other process sees


def _index_manager(index, catalog, store, embedder, lock, s: Settings) -> IndexManager:
    return IndexManager(index, catalog, store, embedder, s.embedder, lock=lock,
                        verify_seconds=s.index_verify_seconds, check_seconds=s.index_check_seconds)


def _server_index(url: str, api_key: str | None):
    from adapters.qdrant.server import QdrantServerIndex

    return QdrantServerIndex.from_url(url, api_key=api_key)


def _local_embedder(model: str, dimension: int | None):
    from adapters.embedders.local import LocalEmbedder  # numpy is imported only when chosen

    return LocalEmbedder(model, dimension)


def _sentence_transformers_embedder(model: str, dimension: int | None):
    from adapters.embedders.local import SentenceTransformersEmbedder  # torch: the optional extra

    return SentenceTransformersEmbedder(model, dimension)


def _ranker_config(s: Settings) -> RankerConfig:
    return RankerConfig(
        rrf_k=s.rrf_k, weighted_alpha=s.weighted_alpha, recency_half_life_days=s.recency_half_life_days,
        mmr_lambda=s.mmr_lambda, vector_weight=s.vector_weight, keyword_weight=s.keyword_weight,
        recency_weight=s.recency_weight, context_weight=s.context_weight, time_weight=s.time_weight,
        options=dict(s.ranker_options),
    )


def _reranker(settings: Settings, client, manager):
    """The configured ``RERANKER_URL`` server, else the first plugin's reranker, else none. A
    search waits for it at most ``QUERY_TIMEOUT`` (or ``EMBEDDING_TIMEOUT`` when shorter)."""
    if settings.reranker_url:
        from adapters.rerankers.http import QUERY_TIMEOUT, HttpReranker

        timeout = min(settings.embedding_timeout, QUERY_TIMEOUT)
        return HttpReranker(settings.reranker_url, settings.reranker_api, client, settings.reranker_model,
                            timeout=timeout)
    return manager.hook.nexusai_memory_reranker(options=dict(settings.ranker_options))


def _setting(name: str):
    return attrgetter(name)


async def _owned(name: str, thing, close: str = "close", *outlives) -> AsyncIterator:
    """``thing`` until shutdown, then closed. ``outlives``: resources closed only after this one
    (dependency-injector shuts a resource down once no initialised resource names it)."""
    try:
        yield thing
    finally:
        try:
            await getattr(thing, close)()
        except Exception:
            log.exception("closing the %s failed", name)


async def _running_worker(worker, enabled: bool, *outlives) -> AsyncIterator:
    """The embedding worker running (when enabled) until shutdown; stopping lets its pass finish."""
    if enabled:
        worker.start()
    try:
        yield worker
    finally:
        try:
            await worker.stop()
        except Exception:
            log.exception("stopping the embedding worker failed")


async def _running_monitor(monitor, *outlives) -> AsyncIterator:
    monitor.start()
    try:
        yield monitor
    finally:
        try:
            await monitor.stop()
        except Exception:
            log.exception("stopping the health monitor failed")


def _expiry_sweeper(expiry, seconds: float, lock):
    from app.expiry import ExpirySweeper

    # Processes sharing a store's maintenance lock sweep it one at a time: its holder (the sweep
    # takes the lock when no process holds it, e.g. before the index manager starts). Replicas
    # with a lock each may sweep together: an expired row is deleted by one (SKIP LOCKED on PostgreSQL).
    return ExpirySweeper(expiry, seconds, lock.try_acquire)


def _health_monitor(container):
    from app.health import standard_monitor  # health imports litestar: only the app needs it

    return standard_monitor(container, container.settings(), lambda: container.indexing().dead_lettered)


def _service_metrics(indexing):
    from app.metrics import ServiceMetrics  # prometheus-client and litestar: only when metrics are asked for

    metrics = ServiceMetrics()
    metrics.watch_indexing(indexing)
    return metrics


def _embedding_worker(indexing, batch: int, manager, store_kind: str):
    from app.worker import EmbeddingWorker

    if store_kind == "postgres":
        # Every replica drains: a claim locks its jobs (FOR UPDATE SKIP LOCKED), so no two take one.
        return EmbeddingWorker(indexing, batch=batch)
    # One process per SQLite file drains the outbox: the one maintaining the index (app.worker).
    return EmbeddingWorker(indexing, batch=batch, drains=lambda: getattr(manager, "maintaining", True))


class Container(containers.DeclarativeContainer):
    __self__ = providers.Self()
    settings = providers.Dependency(instance_of=Settings)

    # -- the store (one group: the records and the index catalog beside them) --------------------
    store = providers.Selector(
        providers.Callable(_setting("store"), settings),
        sqlite=providers.Singleton(SqliteStore.open, providers.Callable(_setting("sqlite_path"), settings),
                                   providers.Callable(_setting("sqlite_synchronous"), settings),
                                   providers.Callable(_setting("event_retention"), settings)),
        memory=providers.Singleton(MemoryStore, providers.Callable(_setting("event_retention"), settings)),
        postgres=providers.Singleton(_postgres_store, providers.Callable(_setting("database_url"), settings),
                                     providers.Callable(_setting("event_retention"), settings)),
    )

    catalog = providers.Singleton(_catalog, store)
    api_keys = providers.Singleton(_api_keys, store)
    store_resource = providers.Resource(_owned, "store", store)

    # -- adapters ------------------------------------------------------------------------------------
    http_client = providers.Singleton(make_http_client, providers.Callable(_setting("embedding_timeout"), settings))

    # HTTP and hashing embedders are told their size; in-process models know their own.
    _dim = providers.Callable(_setting("served_dimension"), settings)
    _own_dim = providers.Callable(_setting("embedding_dim"), settings)
    _model = providers.Callable(_setting("model_name"), settings)
    embedder = providers.Selector(
        providers.Callable(_setting("embedder"), settings),
        **{
            "embedding-service": providers.Singleton(
                EmbeddingServiceEmbedder, providers.Callable(_setting("embedding_service_url"), settings),
                _dim, http_client,
            ),
            "ollama": providers.Singleton(
                OllamaEmbedder, providers.Callable(_setting("ollama_url"), settings), _dim, http_client, model=_model,
            ),
            "openai": providers.Singleton(
                OpenAIEmbedder, providers.Callable(_setting("openai_url"), settings), _model, _dim, http_client,
                api_key=providers.Callable(_setting("openai_api_key"), settings),
            ),
            "local": providers.Singleton(_local_embedder, _model, _own_dim),
            "sentence-transformers": providers.Singleton(_sentence_transformers_embedder, _model, _own_dim),
            "hash": providers.Singleton(HashEmbedder, _dim),
            "fake": providers.Singleton(FakeEmbedder, _dim),
        },
    )

    vector_index = providers.Selector(
        providers.Callable(_setting("vector_index"), settings),
        edge=providers.Singleton(
            _edge_index, providers.Callable(_setting("resolved_qdrant_path"), settings), settings),
        server=providers.Singleton(
            _server_index, providers.Callable(_setting("qdrant_url"), settings),
            providers.Callable(_setting("qdrant_api_key"), settings),
        ),
        memory=providers.Singleton(InMemoryVectorIndex),
    )

    maintenance_lock = providers.Singleton(_maintenance_lock, settings)
    index_manager = providers.Singleton(_index_manager, vector_index, catalog, store, embedder, maintenance_lock,
                                        settings)

    plugin_manager = providers.Singleton(get_plugin_manager, load_entrypoints=True)
    rankers = providers.Singleton(RankerRegistry, plugin_manager, providers.Callable(_ranker_config, settings))

    # -- services ------------------------------------------------------------------------------------
    sessions = providers.Singleton(SessionService, store)
    episodes = providers.Singleton(EpisodeService, store)
    entities = providers.Singleton(EntityService, store)
    summaries = providers.Singleton(SummaryService, store)
    users = providers.Singleton(UserService, store)
    expiry = providers.Singleton(ExpiryService, store)
    expiry_sweeper = providers.Singleton(_expiry_sweeper, expiry,
                                         providers.Callable(_setting("expiry_sweep_seconds"), settings),
                                         maintenance_lock)
    indexing = providers.Singleton(IndexingService, store, index_manager, embedder,
                                   max_attempts=providers.Callable(_setting("embedding_max_attempts"), settings))
    # The app's metrics: SearchService gets their leg observer when it is built (a hook wired
    # here), and the embed counters are read from ``indexing``.
    metrics = providers.Singleton(_service_metrics, indexing)
    fresh = providers.Singleton(
        ReadYourWrites, store, indexing, providers.Callable(_setting("read_your_writes_max"), settings),
        providers.Callable(lambda s: s.read_your_writes_ms / 1000, settings),
    )
    reranker = providers.Singleton(_reranker, settings, http_client, plugin_manager)
    search = providers.Singleton(
        SearchService, store, index_manager, embedder, rankers,
        providers.Callable(_setting("default_ranker"), settings), observe_leg=metrics.provided.observe_leg,
        fresh=fresh, reranker=reranker, rerank_depth=providers.Callable(_setting("rerank_depth"), settings),
        query_timeout=providers.Callable(_setting("embedding_timeout"), settings),
    )
    context = providers.Singleton(ContextService, store, search)
    history = providers.Singleton(HistoryService, store)
    keys = providers.Singleton(KeyService, api_keys)
    authenticator = providers.Singleton(
        _authenticator, api_keys, providers.Callable(_setting("memory_api_key"), settings),
        providers.Callable(_setting("key_rate_limit"), settings),
        providers.Callable(_setting("key_cache_seconds"), settings))
    events = providers.Singleton(EventService, store)
    worker = providers.Singleton(_embedding_worker, indexing, providers.Callable(_setting("worker_batch"), settings),
                                 index_manager, providers.Callable(_setting("store"), settings))
    health = providers.Singleton(_health_monitor, __self__)

    # -- lifecycles: awaiting one hands its object over to the container, which closes it at
    # shutdown after everything that names it (http client < embedder < index manager < worker < health).
    http_client_resource = providers.Resource(_owned, "http client", http_client, "aclose")
    embedder_resource = providers.Resource(_owned, "embedder", embedder, "aclose", http_client_resource)
    # The maintenance lock is let go only once the index is closed: whoever takes it next may open the shards.
    maintenance_lock_resource = providers.Resource(_owned, "maintenance lock", maintenance_lock, "release")
    vector_index_resource = providers.Resource(_owned, "vector index", vector_index, "close", store_resource,
                                               maintenance_lock_resource)
    index_manager_resource = providers.Resource(_owned, "index manager", index_manager, "close",
                                                vector_index_resource, embedder_resource, store_resource)
    worker_running = providers.Resource(_running_worker, worker, providers.Callable(_setting("worker_enabled"), settings),
                                        index_manager_resource)
    health_running = providers.Resource(_running_monitor, health, worker_running)
    # The sweep may take the maintenance lock: it stops before the lock is let go.
    expiry_running = providers.Resource(_running_monitor, expiry_sweeper, store_resource, maintenance_lock_resource)


def build_container(settings: Settings) -> Container:
    container = Container(settings=settings)
    if settings.vector_index == "edge" and not settings.resolved_qdrant_path:
        # A throwaway SQLite store gets a throwaway vector index to match.
        container.vector_index.override(providers.Singleton(InMemoryVectorIndex))
    return container


async def shutdown(container: Container) -> None:
    """Close what the container was handed (its ``*_resource`` and ``*_running`` providers), most
    dependent first; each close is attempted and a failure logged."""
    result = container.shutdown_resources()
    if inspect.isawaitable(result):
        await result


@asynccontextmanager
async def opened(settings: Settings) -> AsyncIterator[Container]:
    """A container for one CLI command, shut down when the command is done."""
    container = build_container(settings)
    try:
        yield container
    finally:
        await shutdown(container)
