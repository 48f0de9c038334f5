"""Serving the MCP tools (``app.mcp_server``): the SDK's app mounted at ``/mcp`` inside the REST app
(``serve``; built on first use by ``app.mcp_mount``), or on their own with ``memory-service mcp`` over
stdio or streamable HTTP behind the REST API's keys."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Any

from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from app import heap
from app.auth import PRINCIPAL, Denied, allowed_mcp_hosts, bearer_token, check_mcp_origin, send_denied
from app.config import Settings
from app.container import Container, build_container, shutdown
from app.mcp_mount import MCP_PATH
from app.mcp_server import Transport, build_server

log = logging.getLogger("nexusai.mcp")

# Host and Origin are checked before the SDK's app, against MCP_ALLOWED_HOSTS and without regard to
# case (``check_mcp_origin``). Bound to loopback, the SDK would add a check of its own, case-sensitive
# and with its own list, answering 421 to hosts the operator allowed.
OUR_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


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


def mounted_app(container: Container, settings: Settings, wrote: Callable[[], None],
                stateless: bool = False) -> tuple[Any, Any]:
    """The SDK's ASGI app for ``/mcp`` inside the REST app and its session manager, whose ``run()``
    must be held open while it serves (``app.mcp_mount`` mounts it, built on first use)."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

    server = build_server(container, wrote)
    server.streamable_http_app(streamable_http_path=MCP_PATH, host=settings.host,  # creates the session manager
                               stateless_http=stateless, transport_security=OUR_HOST_CHECK)
    return StreamableHTTPASGIApp(server.session_manager), server.session_manager


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
        trimming = asyncio.create_task(heap.return_freed_memory(), name="return freed memory")
        try:
            if transport == "stdio":
                await server.run_stdio_async()
            else:
                await _serve_http(server, settings, host, port, container.authenticator())
        finally:
            trimming.cancel()
    finally:
        await shutdown(container)


async def _serve_http(server: MCPServer, settings: Settings, host: str, port: int, authenticator: Any) -> None:
    import uvicorn

    app: Any = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, transport_security=OUR_HOST_CHECK)
    app = KeyedMcp(app, authenticator, allowed_mcp_hosts(settings.mcp_allowed_hosts, host))
    log.info("MCP over streamable HTTP at http://%s:%d%s", host, port, MCP_PATH)
    config = uvicorn.Config(app, host=host, port=port, log_level=settings.log_level, access_log=False,
                            log_config=None, timeout_graceful_shutdown=10)
    await uvicorn.Server(config).serve()
