"""Keep-alive connections to each HTTP worker of a ``serve`` with ``WORKERS=2``.

Which worker answers is the kernel's choice per connection, so a connection asks ``/metrics``
which worker it reached (``memory_worker{pid}``); a pair of connections then talks to both workers
for sure. Every wait is bounded."""

from __future__ import annotations

import re
import time

import httpx

CONNECT_ATTEMPTS = 200  # fresh connections tried until both workers have been reached


def worker_of(client: httpx.Client) -> tuple[int, str]:
    """(the pid of the worker this connection reached, its part in the index), from /metrics."""
    found = re.search(r'memory_worker\{pid="(\d+)",role="(\w+)"\} 1\.0', client.get("/metrics").text)
    assert found is not None
    return int(found[1]), found[2]


def two_workers(url: str, timeout: float = 10.0) -> tuple[httpx.Client, httpx.Client]:
    """A keep-alive connection to each of the two workers (``timeout`` per request)."""
    found: dict[int, httpx.Client] = {}
    for _ in range(CONNECT_ATTEMPTS):
        client = httpx.Client(base_url=url, timeout=timeout, limits=httpx.Limits(max_connections=1))
        try:
            pid, _ = worker_of(client)
        except httpx.HTTPError:
            client.close()
            time.sleep(0.05)
            continue
        if pid in found:
            client.close()
            continue
        found[pid] = client
        if len(found) == 2:
            first, second = found.values()
            return first, second
    for client in found.values():
        client.close()
    raise AssertionError(f"could not reach both workers in {CONNECT_ATTEMPTS} connections")
