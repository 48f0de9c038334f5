"""The Litestar application factory."""

from __future__ import annotations

import hmac
import logging
from contextlib import asynccontextmanager

from litestar import Litestar, Request
from litestar.datastructures import State
from litestar.exceptions import NotAuthorizedException

from app.config import ConfigError, Settings
from app.container import Container, build_container
from app.docs import DOCS_PATHS, docs_asset, open_operations, openapi_config
from app.errors import EXCEPTION_HANDLERS
from app.health import health
from app.mcp_server import mounted as mounted_mcp
from app.metrics import ServiceMetrics, metrics
from app.middleware import RequestObserver, install_request_id_filter
from app.routes.deps import DEPENDENCIES
from app.routes.entities import EntityController, RelationshipController
from app.routes.episodes import EpisodeController
from app.routes.retrieval import RetrievalController
from app.routes.sessions import SessionController
from app.routes.summaries import SummaryController
from app.worker import EmbeddingWorker
from domain.errors import Invalid

log = logging.getLogger("nexusai.app")

OPEN_PATHS = frozenset({"/health"}) | DOCS_PATHS


def check_configuration(container: Container) -> None:
    """Fail before serving on configuration that cannot work (raises ``ConfigError``)."""
    settings = container.settings()
    try:
        container.rankers().get(settings.default_ranker, field="DEFAULT_RANKER")
    except Invalid as exc:
        raise ConfigError("DEFAULT_RANKER", exc.message) from None
    dimension = container.embedder().dimension
    if dimension != settings.embedding_dim:
        raise ConfigError("EMBEDDING_DIM", f"is {settings.embedding_dim} but the embedder gives {dimension}")


def create_app(settings: Settings, container: Container | None = None) -> Litestar:
    """Build the app for ``settings``: a fresh container (or the one given, for tests), every
    route, the error table, and a lifespan that opens the stores, ensures the vector collections,
    and runs the embedding worker until shutdown."""
    container = container or build_container(settings)
    check_configuration(container)
    worker = EmbeddingWorker(container.indexing(), batch=settings.worker_batch)
    service_metrics = ServiceMetrics()
    install_request_id_filter("nexusai.errors", "nexusai.app")
    mcp_endpoint, mcp_sessions = mounted_mcp(container, settings, worker.notify)

    @asynccontextmanager
    async def lifespan(app: Litestar):
        container.store()
        await container.indexing().ensure_collections()
        service_metrics.watch_indexing(container.indexing())
        container.search().observe_leg = service_metrics.observe_leg
        if settings.worker_enabled:
            worker.start()
        try:
            async with mcp_sessions.run():
                yield
        finally:
            await worker.stop()
            await close_container(container)

    async def after_response(request: Request) -> None:  # async: a sync hook costs a thread hop
        if request.method != "GET":
            worker.notify()

    async def require_api_key(request: Request) -> None:
        if settings.memory_api_key is None or request.url.path in OPEN_PATHS:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), settings.memory_api_key.encode()):
            raise NotAuthorizedException("a valid 'Authorization: Bearer <MEMORY_API_KEY>' header is required")

    app = Litestar(
        route_handlers=[
            health, SessionController, EpisodeController, EntityController, RelationshipController,
            SummaryController, RetrievalController, metrics, docs_asset, mcp_endpoint,
        ],
        dependencies=DEPENDENCIES,
        exception_handlers=EXCEPTION_HANDLERS,
        state=State({"container": container, "worker": worker, "health_cache": {}, "metrics": service_metrics}),
        lifespan=[lifespan],
        before_request=require_api_key,
        after_response=after_response,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi_config(settings),
        debug=False,
        logging_config=None,  # app.logs configures logging; Litestar's default would replace its root handler
    )
    open_operations(app, OPEN_PATHS)
    # Outermost, so unrouted requests and the final status (after error handlers) are seen.
    app.asgi_handler = RequestObserver(app.asgi_handler, service_metrics)
    return app


async def close_container(container: Container) -> None:
    """Close what the container opened, most dependent first; each close is attempted."""
    for name, closer in (
        ("vector index", lambda: container.vector_index().close()),
        ("embedder", lambda: container.embedder().aclose()),
        ("http client", lambda: container.http_client().aclose()),
        ("store", lambda: container.store().close()),
    ):
        try:
            await closer()
        except Exception:
            log.exception("closing the %s failed", name)
