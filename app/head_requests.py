"""HEAD answered like GET, without the body (RFC 9110 section 9.3.2).

Litestar refuses a HEAD handler that returns a body, so its router answers HEAD on a ``@get``
route with 405. ``app.gates`` hands that 405 here when the route allows GET: the request is routed
again as a GET through Litestar's own router — the same middleware, guards and handler, the same
status and headers, ``content-length`` included — and the body bytes are dropped on the way out.
``app.errors`` adds HEAD to the ``Allow`` of a 405 wherever GET is allowed.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.types import Message, Receive, Scope, Send


class _HeadAsGet(Response[None]):
    """A response that answers by running the request as a GET and sending no body."""

    def __init__(self, request: Request) -> None:
        super().__init__(content=None)
        self._app = request.app

    def to_asgi_response(self, app: Any, request: Request, **_: Any) -> Any:  # noqa: ARG002 (the signature is Litestar's)
        return self._answer

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        # A copy: the server that owns ``scope`` still sees a HEAD, and answers it as one.
        await self._app.asgi_router({**scope, "method": "GET"}, receive, without_body)  # type: ignore[arg-type]


def answer_head_as_get(request: Request) -> Response[None]:
    """The answer to a HEAD ``request`` on a path whose route allows GET."""
    return _HeadAsGet(request)
