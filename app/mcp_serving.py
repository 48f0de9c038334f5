"""Serving the MCP tools (``app.mcp_server``): mounted at ``/mcp`` inside the REST app (``serve``),
or on their own with ``memory-service mcp`` over stdio or streamable HTTP behind the REST API's keys."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from mcp.server import MCPServer

from app import heap
from app.auth import PRINCIPAL, Denied, allowed_mcp_hosts, bearer_token, check_mcp_origin, send_denied
from app.config import Settings
from app.container import Container, build_container, shutdown
from app.mcp_server import MCP_PATH, Transport, build_server

log = logging.getLogger("nexusai.mcp")


class KeyedMcp:
    """ASGI wrapper of ``memory-service mcp --transport streamable-http``: the same keys as the REST
    API (app.auth's ``Authenticator``: the bootstrap key, stored keys with their scopes, owners and
    rates) and the same ``Host``/``Origin`` rule; the principal goes into ``scope["state"]`` where
    the tools find it (``PrincipalOfRequest``). ``/health`` stays open."""

    def __init__(self, app: Any, authenticator: Any, hosts: Collection[str]) -> None:
        self.app, self.authenticator, self.hosts = app, authenticator, frozenset(hosts)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") == "/health":
            await self.app(scope, receive, send)
            return
        try:
            check_mcp_origin(scope, self.hosts)
            principal = await self.authenticator.principal(bearer_token(scope))
        except Denied as denied:
            await send_denied(send, denied)
            return
        scope.setdefault("state", {})[PRINCIPAL] = principal
        await self.app(scope, receive, send)


def mounted(container: Container, settings: Settings, wrote: Callable[[], None], stateless: bool = False):
    """MCP over streamable HTTP inside the REST app, at ``/mcp``: the same process, container and
    embedding worker as ``serve`` (an embedded store is opened by one process only). Returns the
    Litestar handler and the session manager, whose ``run()`` the app's lifespan must hold open.
    ``stateless`` (several worker processes): no session outlives its request, since the next
    request of a client may reach another worker, which would not know the session."""
    from litestar.handlers import asgi
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

    server = build_server(container, wrote)
    server.streamable_http_app(streamable_http_path=MCP_PATH, host=settings.host,  # creates the session manager
                               stateless_http=stateless)
    # Keys are checked by the REST app's door (app.auth), which /mcp passes like every route.
    app: Any = StreamableHTTPASGIApp(server.session_manager)

    @asgi(MCP_PATH, is_mount=True, copy_scope=True)
    async def mcp_endpoint(scope: Any, receive: Any, send: Any) -> None:
        await app(scope, receive, send)

    return mcp_endpoint, server.session_manager


async def run(settings: Settings, transport: Transport, host: str, port: int) -> None:
    """Open the stores, run the embedding worker, and serve MCP until stdin closes (stdio) or a
    signal stops uvicorn (streamable HTTP); then close everything as ``serve`` does."""
    from app.main import check_configuration  # app.main imports this module: not at the top

    container = build_container(settings)
    check_configuration(container)
    try:
        await container.store_resource()
        manager = await container.index_manager_resource()
        await manager.start()  # never waits for a build, as in `serve`
        manager.run()
        worker = await container.worker_running()  # started unless EMBEDDING_WORKER=false
        server = build_server(container, worker.notify)
        heap.freeze_start_up()  # a long-running server too: start-up's objects out of every later collection
        if transport == "stdio":
            await server.run_stdio_async()
        else:
            await _serve_http(server, settings, host, port, container.authenticator())
    finally:
        await shutdown(container)


async def _serve_http(server: MCPServer, settings: Settings, host: str, port: int, authenticator: Any) -> None:
    import uvicorn

    app: Any = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    app = KeyedMcp(app, authenticator, allowed_mcp_hosts(settings.mcp_allowed_hosts, host))
    log.info("MCP over streamable HTTP at http://%s:%d%s", host, port, MCP_PATH)
    config = uvicorn.Config(app, host=host, port=port, log_level=settings.log_level, access_log=False,
                            log_config=None, timeout_graceful_shutdown=10)
    await uvicorn.Server(config).serve()
