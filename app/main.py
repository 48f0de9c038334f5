"""The Litestar application factory."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from contextlib import asynccontextmanager

from litestar import Litestar, Request
from litestar.config.cors import CORSConfig
from litestar.datastructures import State

from app import heap
from app.config import ConfigError, Settings
from app.container import Container, build_container, shutdown
from app.docs import DOCS_PATHS, docs_asset, open_operations, openapi_config
from app.errors import EXCEPTION_HANDLERS
from app.head_requests import HeadAsGet
from app.hot_routes import HOT_FAILURE, HotRoutes
from app.health import HEALTH_ROUTES
from app.health_gate import HealthGate
from app.index_role import WorkerCollector, attach_index_role
from app.maintenance import claim_index
from app.mcp_server import MCP_PATH, mounted as mounted_mcp
from app.metrics import metrics
from app.middleware import ApiKeyGate, JsonBodiesOnly, RequestObserver, install_request_id_filter
from app.overload import PatientAdmission
from app.routes.deps import dependencies, ids_are_digits
from app.routes.changes import EventController, HistoryController, set_actor
from app.routes.entities import EntityController, RelationshipController
from app.routes.episodes import EpisodeController
from app.routes.retrieval import RetrievalController
from app.routes.sessions import SessionController
from app.routes.summaries import SummaryController
from app.routes.users import UserController
from app.startup import report_embedder, report_store_and_index
from domain.errors import EmbeddingError, Invalid

log = logging.getLogger("nexusai.app")

OPEN_PATHS = frozenset({"/health", "/health/live", "/health/ready"}) | DOCS_PATHS
# Never refused by admission control: an overloaded service must still say how it is.
# GET /events long-polls: it must not hold a request slot while it waits (EventService bounds the waiters).
ADMISSION_EXEMPT = OPEN_PATHS | {"/metrics", "/events"}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def warn_if_exposed(settings: Settings) -> None:
    """Say so at start-up when anyone on the network can read and write the memory."""
    if settings.memory_api_key is None and not is_loopback(settings.host):
        log.warning("HOST=%s is reachable from the network and MEMORY_API_KEY is not set: anyone who can "
                    "reach this port can read and change every memory", settings.host)


def check_configuration(container: Container) -> None:
    """Fail before serving on configuration that cannot work (raises ``ConfigError``)."""
    settings = container.settings()
    try:
        container.rankers().get(settings.default_ranker, field="DEFAULT_RANKER")
    except Invalid as exc:
        raise ConfigError("DEFAULT_RANKER", exc.message) from None
    try:
        dimension = container.embedder().dimension
    except EmbeddingError as exc:  # an in-process model whose size cannot be known up front
        raise ConfigError("EMBEDDING_DIM", exc.message) from None
    if settings.embedding_dim is not None and dimension != settings.embedding_dim:
        raise ConfigError("EMBEDDING_DIM", f"is {settings.embedding_dim} but the embedder gives {dimension}")


def create_app(settings: Settings, container: Container | None = None, *, workers: int = 1,
               index_host: bool = False, serving: bool = False) -> Litestar:
    """Build the app for ``settings``: a fresh container (or the one given, for tests), every
    route, the error table, and a lifespan that opens the stores, ensures the vector collections,
    and runs the embedding worker until shutdown. With ``index_host`` (``serve`` on a SQLite file)
    the vector index and the embedding worker live in the index host process (``app.index_host``)
    and this process follows it; otherwise, with ``workers`` > 1, they belong to the worker that
    wins the owner election (``app.index_role``), and with one, to this process. ``serving``: the
    app is this process's one app for its lifetime (``serve``), so once started its heap is
    settled for the garbage collector (``app.heap``); tests leave it alone."""
    container = container or build_container(settings)
    check_configuration(container)
    # Before anything builds a service: they must get this worker's view of the index.
    role = attach_index_role(container, settings, may_own=not index_host) if workers > 1 or index_host else None
    worker, service_metrics, monitor = container.worker(), container.metrics(), container.health()
    notify = worker.notify if role is None else role.notify
    install_request_id_filter("nexusai.errors", "nexusai.app")
    warn_if_exposed(settings)
    mcp_endpoint, mcp_sessions = mounted_mcp(container, settings, notify, stateless=workers > 1)

    @asynccontextmanager
    async def lifespan(app: Litestar):
        # What the container is handed here it closes at shutdown, most dependent first.
        embedder_report = index_claim = None
        try:
            await container.store_resource()
            # Another process's write wakes this one's long-polls too (where the store can tell).
            loop = asyncio.get_running_loop()
            container.store().events.on_change(lambda: loop.call_soon_threadsafe(event_feed.notify))
            (await container.embedder_resource()).start()  # a model loads in the background; /health says "starting"
            if role is None:
                # The owner lock WORKERS > 1 elects on: the CLI beside this process sees it runs.
                index_claim = claim_index(settings)
                manager = await container.index_manager_resource()
                await manager.start()  # never waits for a build: derived data does not hold up start-up
                manager.run()
            else:  # the owner opens the index and runs the worker; the others follow it
                await container.worker_running()
            await report_store_and_index(container)
            embedder_report = asyncio.create_task(report_embedder(container), name="embedder start-up report")
            if serving:  # an in-process model loads after start-up: settle again once it has (app.heap)
                embedder_report.add_done_callback(lambda report: report.cancelled() or heap.settle())
            await container.worker_running()  # started unless EMBEDDING_WORKER=false
            await container.health_running()
            await container.expiry_running()  # purges expired records every EXPIRY_SWEEP_SECONDS
            async with mcp_sessions.run():
                if serving:
                    heap.settle()
                yield
        finally:
            event_feed.close()  # long-polls still waiting answer now
            if embedder_report is not None:
                embedder_report.cancel()
            await shutdown(container)
            if index_claim is not None:
                index_claim.release()

    event_feed = container.events()

    async def before_request(request: Request) -> None:
        # One hook rather than a guard: Litestar copies the route handler for every guard call.
        # The id check first, as a guard would have run it: an unknown path answers 404 before
        # anything else about the request is judged.
        await ids_are_digits(request, request.route_handler)
        await set_actor(request)
        failed = request.scope.pop(HOT_FAILURE, None)  # type: ignore[misc]
        if failed is not None:  # the hot route's handler raised it: answered as its own failure
            raise failed

    def after_write() -> None:
        notify()
        event_feed.notify()  # long-polls wake at once (other processes' writes: within POLL_SECONDS)

    async def after_response(request: Request) -> None:  # async: a sync hook costs a thread hop
        if request.method != "GET":
            after_write()

    app = Litestar(
        route_handlers=[
            *HEALTH_ROUTES, SessionController, EpisodeController, EntityController, RelationshipController,
            SummaryController, UserController, RetrievalController, HistoryController, EventController, metrics,
            docs_asset, mcp_endpoint,
        ],
        dependencies=dependencies(container),
        exception_handlers=EXCEPTION_HANDLERS,
        state=State({"container": container, "worker": worker, "health": monitor, "metrics": service_metrics}),
        lifespan=[lifespan],
        before_request=before_request,
        after_response=after_response,
        cors_config=CORSConfig(allow_origins=list(settings.cors_origins), allow_headers=["authorization", "content-type",
                                                                                          "x-request-id", "x-actor"],
                               allow_methods=["GET", "POST", "PATCH", "DELETE"], expose_headers=["x-request-id"],
                               max_age=600) if settings.cors_origins else None,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi_config(settings),
        debug=False,
        logging_config=None,  # app.logs configures logging; Litestar's default would replace its root handler
    )
    open_operations(app, OPEN_PATHS)
    # Gates run before routing. Admission control is outermost: under overload a refusal must
    # cost as little as possible (no request id, no log line; it has its own counter). Inside it
    # the observer sees unrouted and refused-by-gate requests and the final status of the rest.
    # The hottest plain requests skip Litestar's per-request machinery (app.hot_routes), inside every gate.
    hot = HotRoutes(app.asgi_handler, app, max_body=settings.max_body_bytes, after_write=after_write)
    handler = JsonBodiesOnly(HeadAsGet(hot, passthrough=(MCP_PATH,)))
    handler = ApiKeyGate(handler, settings.memory_api_key, OPEN_PATHS, cors=bool(settings.cors_origins))
    admission = PatientAdmission(RequestObserver(handler, service_metrics), settings.max_in_flight, ADMISSION_EXEMPT,
                                 max_body=settings.max_body_bytes)
    service_metrics.watch_admission(admission)
    if role is not None:
        service_metrics.add_collector(WorkerCollector(role))
    # Outermost: health probes are answered from the monitor's snapshot before any other work.
    app.asgi_handler = HealthGate(admission, monitor, settings.memory_api_key, service_metrics)
    return app
