"""The Litestar application factory."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from contextlib import asynccontextmanager

from litestar import Litestar, Request
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.exceptions import MethodNotAllowedException, NotFoundException

from app import heap
from app.auth import KeyAuthentication, allowed_mcp_hosts
from app.config import ConfigError, Settings
from app.container import Container, build_container, shutdown
from app.docs import DOCS_PATHS, SCHEMA_PATH, docs_asset, open_operations, openapi_config
from app.errors import EXCEPTION_HANDLERS
from app.gates import RequestGates, observer
from app.health import HEALTH_ROUTES
from app.idempotency import keyed_write
from app.mcp_mount import MCP_PATH, mounted as mounted_mcp
from app.metrics import metrics
from app.middleware import install_request_id_filter
from app.overload import PatientAdmission
from app.routes.deps import dependencies
from app.routes.changes import EventController, HistoryController, set_actor
from app.routes.entities import EntityController, RelationshipController
from app.routes.keys import KeyController
from app.routes.episodes import EpisodeController
from app.routes.retrieval import RetrievalController
from app.routes.sessions import SessionController
from app.routes.strict import strict_input
from app.routes.summaries import SummaryController
from app.routes.users import UserController
from app.serving import resolve_workers, single_process_reason
from app.startup import report_embedder, report_store_and_index
from domain.errors import EmbeddingError, Invalid
from domain.scoped import Services

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


def key_authentication(container: Container, settings: Settings) -> KeyAuthentication:
    """The door of every route (app.auth): keys to principals, and the services as each sees them."""
    plain = Services(container.sessions(), container.episodes(), container.entities(), container.summaries(),
                     container.users(), container.search(), container.context(), container.history(),
                     container.events())
    return KeyAuthentication(container.authenticator(), plain, open_paths=OPEN_PATHS,
                             open_prefixes=(f"{SCHEMA_PATH}/",), metrics_path="/metrics", mcp_path=MCP_PATH,
                             mcp_hosts=allowed_mcp_hosts(settings.mcp_allowed_hosts, settings.host), then=keyed_write)


def create_app(settings: Settings, container: Container | None = None, *, serving: bool = False) -> Litestar:
    """Build the app for ``settings``: a fresh container (or the one given, for tests), every
    route, the error table, and a lifespan that opens the stores, the vector index and its manager,
    and runs the embedding worker until shutdown, all in this process. Where ``WORKERS`` processes
    serve one store (``app.serving``), each runs its own; the store's maintenance lock lets one at a
    time verify, repair and rebuild the index. ``serving``: the app is this process's one app for
    its lifetime (``serve``), so once started its heap is frozen for the garbage collector
    and what it frees is given back to the system every ``TRIM_SECONDS`` (``app.heap``); tests
    leave it alone."""
    container = container or build_container(settings)
    check_configuration(container)
    worker, service_metrics, monitor = container.worker(), container.metrics(), container.health()
    notify = worker.notify
    install_request_id_filter("nexusai.errors", "nexusai.app")
    warn_if_exposed(settings)
    # Sessions kept in one worker's memory would be unknown to the others.
    several = single_process_reason(settings) is None and resolve_workers(settings) > 1
    mcp_endpoint, mcp = mounted_mcp(container, settings, notify, stateless=several)

    @asynccontextmanager
    async def lifespan(app: Litestar):
        # What the container is handed here it closes at shutdown, most dependent first.
        embedder_report = trimming = None
        try:
            await container.store_resource()
            await container.authenticator().open_service()  # whether any key closes the service, known from the start
            # Another process's write wakes this one's long-polls too (where the store can tell).
            loop = asyncio.get_running_loop()
            container.store().events.on_change(lambda: loop.call_soon_threadsafe(event_feed.notify))
            (await container.embedder_resource()).start()  # a model loads in the background; /health says "starting"
            manager = await container.index_manager_resource()
            # Never waits for a build: derived data does not hold up start-up. It takes the store's
            # maintenance lock, which tells the CLI beside this process that a service runs.
            await manager.start()
            manager.run()
            await report_store_and_index(container)
            embedder_report = asyncio.create_task(report_embedder(container), name="embedder start-up report")
            if serving:  # an in-process model loads after start-up: freeze again once it has (app.heap)
                embedder_report.add_done_callback(lambda report: report.cancelled() or heap.freeze_start_up())
            await container.worker_running()  # started unless EMBEDDING_WORKER=false
            await container.health_running()
            await container.expiry_running()  # purges expired records every EXPIRY_SWEEP_SECONDS
            async with mcp.running():
                if serving:
                    heap.freeze_start_up()
                    trimming = asyncio.create_task(heap.return_freed_memory(), name="return freed memory")
                yield
        finally:
            event_feed.close()  # long-polls still waiting answer now
            for task in (embedder_report, trimming):
                if task is not None:
                    task.cancel()
            await shutdown(container)

    event_feed = container.events()

    async def before_request(request: Request) -> None:
        # One hook rather than a guard: Litestar copies the route handler for every guard call.
        # Strict input first (path ids, then query and body), as a guard would have run it: an id
        # that is not plain digits answers 404 before anything else about the request is judged.
        await strict_input(request, request.route_handler)
        await set_actor(request)

    async def after_response(request: Request) -> None:  # async: a sync hook costs a thread hop
        if request.method != "GET":
            notify()
            event_feed.notify()  # long-polls wake at once (other processes' writes: within POLL_SECONDS)

    # Admission control counts for the whole app (one instance); /health and the other exempt
    # paths pass it, so an overloaded service can still say how it is.
    admission = PatientAdmission(None, settings.max_in_flight, ADMISSION_EXEMPT, max_body=settings.max_body_bytes)
    gates = RequestGates(authenticator=container.authenticator(), door=key_authentication(container, settings),
                         open_paths=OPEN_PATHS, admission=admission,
                         metrics=service_metrics, cors=bool(settings.cors_origins))
    app = Litestar(
        route_handlers=[
            *HEALTH_ROUTES, SessionController, EpisodeController, EntityController, RelationshipController,
            SummaryController, UserController, RetrievalController, HistoryController, EventController, metrics,
            docs_asset, mcp_endpoint, KeyController,
        ],
        dependencies=dependencies(container),
        # The router's own 404 and 405 pass no middleware: the gates answer them (401 without the key; HEAD).
        exception_handlers={**EXCEPTION_HANDLERS, NotFoundException: gates.unrouted,
                            MethodNotAllowedException: gates.unrouted},
        middleware=[gates],
        before_send=[observer(service_metrics)],
        state=State({"container": container, "worker": worker, "health": monitor, "metrics": service_metrics,
                     "admission": admission,
                     "authenticator": container.authenticator()}),
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
    service_metrics.watch_admission(admission)
    return app
