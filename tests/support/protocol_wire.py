"""uvicorn's protocol as ``serve`` runs it (``HealthFirstProtocol``), serving an app on the server
end of a real socket pair; tests hand the protocol its bytes themselves and read the client end."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import uvicorn
from uvicorn.server import ServerState

from app.health_gate import HealthFirstProtocol


@contextlib.asynccontextmanager
async def wired(app, **options):
    """(protocol, client socket, server state) for ``app``."""
    config = uvicorn.Config(app, http=HealthFirstProtocol, lifespan="off", log_config=None, **options)
    config.load()
    state = ServerState()
    client, server = socket.socketpair()
    client.setblocking(False)
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_accepted_socket(
        lambda: HealthFirstProtocol(config, state, {}, _loop=loop), sock=server)
    transport.pause_reading()
    try:
        yield protocol, client, state
    finally:
        for task in list(state.tasks):
            task.cancel()
        await asyncio.gather(*state.tasks, return_exceptions=True)
        transport.close()
        client.close()


async def received_until(client: socket.socket, enough) -> bytes:
    """What the client receives until ``enough(received)``, the server closes, or about 5 s."""
    received = b""
    for _ in range(1000):
        try:
            chunk = client.recv(65536)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            break  # closed
        received += chunk or b""
        if enough(received):
            break
        await asyncio.sleep(0.005)
    return received
