"""A response's head and its first body part written to the socket as one write.

uvicorn writes the status line and headers the moment the app sends ``http.response.start`` and
the body when it sends ``http.response.body``: two socket writes for every small JSON answer. On
loopback each write runs the client's receive path and wakes it; a client woken by the head reads
it, finds no body, sleeps again and is woken once more. At one connection that second wake-up was
the largest item of a keyword search's time in the HTTP process (py-spy, round 7: 30 % of the
samples in the head's ``transport.write``). Node's ``res.end`` writes both at once; so does this.

``OneWriteCycle`` holds the head's bytes until the first body part has been written after them,
then writes the two together. Only that span is held: a ``100 Continue`` interim answer (sent
before the response starts) and the later parts of a streamed body go out as they come; a
connection closed while the head is held (an app error after the start, ``Connection: close``)
writes it first.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import RequestResponseCycle


class _HeldWrites:
    """The transport as a cycle sees it from its response's start to its first body part."""

    __slots__ = ("transport", "_parts")

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._parts.append(data)

    def flush(self) -> None:
        if self._parts:
            data = b"".join(self._parts)
            self._parts.clear()
            self.transport.write(data)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, ...: the transport's own
        return getattr(self.transport, name)


class OneWriteCycle(RequestResponseCycle):
    """uvicorn's cycle, sending a response's head together with its first body part."""

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start" and not self.response_started:
            self.transport = _HeldWrites(self.transport)
            await super().send(message)  # the head is held (if it raises, run_asgi closes: see close)
            return
        held = self.transport
        try:
            await super().send(message)
        finally:
            if isinstance(held, _HeldWrites):
                self.transport = held.transport
                held.flush()  # the head and this part in one write (a HEAD answer: the head alone)


def one_write(cycle: RequestResponseCycle) -> RequestResponseCycle:
    """``cycle`` sending as ``OneWriteCycle`` does. uvicorn builds its cycles inside
    ``on_headers_complete``; the subclass adds behaviour and no state, so the protocol switches
    the class of each cycle it starts rather than copying that method."""
    if type(cycle) is RequestResponseCycle:
        cycle.__class__ = OneWriteCycle
    return cycle
