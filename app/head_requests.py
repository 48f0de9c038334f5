"""HEAD answered like GET, without the body (RFC 9110 section 9.3.2).

Litestar refuses a HEAD handler that returns a body, so a ``@get`` route answers HEAD with 405.
This ASGI wrapper runs a HEAD request as a GET (same gates, same handler, same status and headers,
``content-length`` included) and drops the body bytes (``app.errors`` adds HEAD to the ``Allow``
of a 405 wherever GET is allowed). Paths under ``passthrough`` (the mounted MCP app, whose GET opens an event stream) are
left alone.
"""

from __future__ import annotations

from collections.abc import Collection

from litestar.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    def __init__(self, app: ASGIApp, passthrough: Collection[str] = ()) -> None:
        self.app = app
        self.passthrough = tuple(passthrough)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD" or scope["path"].startswith(self.passthrough or ("\0",)):
            await self.app(scope, receive, send)  # everything but HEAD: untouched, at no cost
            return

        async def send_head(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        as_get = {**scope, "method": "GET"}
        try:
            await self.app(as_get, receive, send_head)  # type: ignore[arg-type]
        finally:
            if "path_template" in as_get:  # what the router found, for the request log and metrics
                scope["path_template"] = as_get["path_template"]  # type: ignore[typeddict-unknown-key]
