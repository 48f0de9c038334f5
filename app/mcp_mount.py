"""``/mcp`` in the REST app, with the MCP SDK loaded on the first request that reaches it.

The SDK and what it brings (pydantic, starlette, sse-starlette, its JSON-schema models and the
tools' own) add ~21 MB of resident memory and ~260 modules to a serving process, which most
deployments, talking REST, never use. ``LazyMcp`` is mounted instead of the SDK's app: the
lifespan holds it running from start-up; the first request to ``/mcp`` asks for the MCP server,
which is then built (``app.mcp_serving.mounted_app``) and its session manager run for the rest of
the process's life, in a task the lifespan started, so that no request's context leaks into it;
that request and every later one are handed to the SDK's app. The first call waits for the import
(a fraction of a second, in a thread: other requests are served meanwhile), once per process;
after the lifespan closed, ``/mcp`` answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from litestar.exceptions import ServiceUnavailableException
from litestar.handlers import asgi

from app.config import Settings
from app.container import Container

MCP_PATH = "/mcp"

log = logging.getLogger("nexusai.mcp")


class LazyMcp:
    """The ASGI app behind ``/mcp``: the SDK's, built on first use (see the module's text)."""

    def __init__(self, container: Container, settings: Settings, wrote: Callable[[], None], stateless: bool) -> None:
        self._build = lambda: _sdk_app(container, settings, wrote, stateless)
        self._app: Any = None
        self._wanted = asyncio.Event()
        self._stopping = asyncio.Event()
        self._ready: asyncio.Future[Any] | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Held open by the app's lifespan: the MCP server, once asked for, serves until it closes."""
        self._ready = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._serve(self._ready), name="mcp session manager")
        try:
            yield
        finally:
            self._stopping.set()
            await task
            if self._ready.done() and not self._ready.cancelled():
                self._ready.exception()  # a start-up failure was logged; no "never retrieved" warning

    async def _serve(self, ready: asyncio.Future[Any]) -> None:
        stopping = asyncio.create_task(self._stopping.wait())
        wanted = asyncio.create_task(self._wanted.wait())
        await asyncio.wait((stopping, wanted), return_when=asyncio.FIRST_COMPLETED)
        wanted.cancel()
        if self._stopping.is_set():
            ready.cancel()
            return
        try:
            # The SDK's import (a fraction of a second) runs off the event loop, which serves on.
            await asyncio.to_thread(importlib.import_module, "app.mcp_serving")
            app, manager = self._build()
            async with manager.run():
                ready.set_result(app)
                await stopping
        except Exception as error:  # every /mcp request then fails with it; the REST app serves on
            log.exception("the MCP server could not start")
            if not ready.done():
                ready.set_exception(error)
        finally:
            stopping.cancel()
            if not ready.done():
                ready.cancel()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._stopping.is_set():  # the SDK's session manager is closed, or closing
            raise ServiceUnavailableException("MCP is not being served: the service is stopping")
        if self._app is None:
            if self._ready is None:
                raise ServiceUnavailableException("MCP is not being served: the service is starting")
            self._wanted.set()
            try:
                self._app = await asyncio.shield(self._ready)
            except asyncio.CancelledError:
                if self._ready.cancelled():  # the service stopped before MCP was up; not this request
                    raise ServiceUnavailableException("MCP is not being served: the service is stopping") from None
                raise
        await self._app(scope, receive, send)


def _sdk_app(container: Container, settings: Settings, wrote: Callable[[], None], stateless: bool) -> tuple[Any, Any]:
    from app.mcp_serving import mounted_app

    return mounted_app(container, settings, wrote, stateless)


def mounted(container: Container, settings: Settings, wrote: Callable[[], None], stateless: bool = False):
    """MCP over streamable HTTP inside the REST app, at ``/mcp``: the same process, container and
    embedding worker as ``serve`` (an embedded store is opened by one process only). Returns the
    Litestar handler and the ``LazyMcp``, whose ``running()`` the app's lifespan must hold open.
    ``stateless`` (several worker processes): no session outlives its request, since the next
    request of a client may reach another worker, which would not know the session."""
    app = LazyMcp(container, settings, wrote, stateless)

    # Keys are checked by the REST app's door (app.auth), which /mcp passes like every route.
    @asgi(MCP_PATH, is_mount=True, copy_scope=True)
    async def mcp_endpoint(scope: Any, receive: Any, send: Any) -> None:
        await app(scope, receive, send)

    return mcp_endpoint, app
