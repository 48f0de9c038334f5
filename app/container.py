"""The composition root: one container that turns ``Settings`` into adapters and services.

Nothing is built at import time; ``build_container(settings)`` wires a fresh container and the
app factory (or a CLI command, or a test) asks it for what it needs. Adapters are chosen with
``providers.Selector`` from configuration; tests swap any of them with ``provider.override``.
"""

from __future__ import annotations

from operator import attrgetter

from dependency_injector import containers, providers

from adapters.embedders.embedding_service import EmbeddingServiceEmbedder
from adapters.embedders.hashing import HashEmbedder
from adapters.embedders.http import make_http_client
from adapters.embedders.ollama import OllamaEmbedder
from adapters.embedders.openai import OpenAIEmbedder
from adapters.memory.catalog import InMemoryIndexCatalog
from adapters.memory.fake_embedder import FakeEmbedder
from adapters.memory.store import InMemoryMemoryStore
from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.sqlite.catalog import SqliteIndexCatalog
from adapters.sqlite.store import SqliteMemoryStore
from app.config import Settings
from app.plugins import RankerRegistry, get_plugin_manager
from domain.context import ContextService
from domain.index_manager import IndexManager
from domain.indexing import IndexingService
from domain.ranking import RankerConfig
from domain.retrieval import SearchService
from domain.services import EntityService, EpisodeService, SessionService, SummaryService


def _edge_index(path: str, s: Settings):
    from adapters.qdrant.edge import QdrantEdgeIndex  # the engine loads only when chosen

    return QdrantEdgeIndex(
        path, optimize_every=s.index_optimize_every, inline_optimize_points=s.index_inline_build_points,
        disk_reserve_bytes=s.index_disk_reserve_mb * 2**20,
    )


def _catalog(store):
    # The manifest and stored embeddings live beside the records, in the same store (tests
    # override the store provider, so this follows the store actually built).
    if isinstance(store, SqliteMemoryStore):
        return SqliteIndexCatalog(store.database)
    return InMemoryIndexCatalog(store)


def _index_manager(index, catalog, store, embedder, s: Settings) -> IndexManager:
    return IndexManager(index, catalog, store, embedder, s.embedder,
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


def _setting(name: str):
    return attrgetter(name)


class Container(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=Settings)

    store = providers.Selector(
        providers.Callable(_setting("store"), settings),
        sqlite=providers.Singleton(SqliteMemoryStore.open, providers.Callable(_setting("sqlite_path"), settings),
                                   providers.Callable(_setting("sqlite_synchronous"), settings)),
        memory=providers.Singleton(InMemoryMemoryStore),
    )

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

    catalog = providers.Singleton(_catalog, store)
    index_manager = providers.Singleton(_index_manager, vector_index, catalog, store, embedder, settings)

    plugin_manager = providers.Singleton(get_plugin_manager, load_entrypoints=True)
    rankers = providers.Singleton(RankerRegistry, plugin_manager, providers.Callable(_ranker_config, settings))

    sessions = providers.Singleton(SessionService, store)
    episodes = providers.Singleton(EpisodeService, store)
    entities = providers.Singleton(EntityService, store)
    summaries = providers.Singleton(SummaryService, store)
    indexing = providers.Singleton(IndexingService, store, index_manager, embedder,
                                   max_attempts=providers.Callable(_setting("embedding_max_attempts"), settings))
    search = providers.Singleton(
        SearchService, store, index_manager, embedder, rankers,
        providers.Callable(_setting("default_ranker"), settings),
    )
    context = providers.Singleton(ContextService, store, search)


def build_container(settings: Settings) -> Container:
    container = Container(settings=settings)
    if settings.vector_index == "edge" and not settings.resolved_qdrant_path:
        # A throwaway SQLite store gets a throwaway vector index to match.
        container.vector_index.override(providers.Singleton(InMemoryVectorIndex))
    return container
