"""A TCP proxy in front of a real server that injects faults, one connection at a time.

Each connection the proxy accepts gets the next fault of its schedule:

- ``pass``: forwarded both ways;
- ``drop``: the request is forwarded, and the connection is reset as soon as the answer starts
  (the service did the work; the client never hears of it);
- ``503``: answered ``503`` with ``Retry-After: 0`` by the proxy itself, the request never forwarded.

Every forwarded request gets ``Connection: close``, so a connection carries one request and the
schedule counts attempts.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from collections.abc import Sequence

_CHUNK = 65536
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 0\r\n"
         b"Connection: close\r\nContent-Length: 67\r\n\r\n"
         b'{"code":"unavailable","message":"injected","field":null,"status":503}')


def _reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _read_request(sock: socket.socket) -> bytes:
    """One whole request (head and Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(_CHUNK)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(_CHUNK)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _closing(request: bytes) -> bytes:
    head, _, body = request.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int, schedule: Sequence[str]) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._faults = itertools.cycle(schedule)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.seen: list[str] = []  # the fault each connection got, in order
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._listener.close()
        self._thread.join(5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                fault = next(self._faults)
                self.seen.append(fault)
            threading.Thread(target=self._serve, args=(client, fault), daemon=True).start()

    def _serve(self, client: socket.socket, fault: str) -> None:
        try:
            request = _read_request(client)
            if fault == "503":
                client.sendall(_BUSY)
                client.close()
                return
            with socket.create_connection(self._upstream) as upstream:
                upstream.sendall(_closing(request))
                while chunk := upstream.recv(_CHUNK):
                    if fault == "drop":
                        _reset(client)  # the answer started: the client never gets it
                        return
                    client.sendall(chunk)
            client.close()
        except OSError:
            client.close()
