"""A follower's write notices reach the index owner, one frame per pass of the event loop.

A real ``IndexServer`` on a unix socket and a real ``SocketVectorIndex`` in this event loop. After a
burst of notices, a round trip (``health``) is answered only after the server has read every frame
sent before it (one connection, frames in order), so the count of notices seen is final then.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.ipc.client import SocketVectorIndex
from adapters.ipc.server import IndexServer
from adapters.memory.vector_index import InMemoryVectorIndex


async def _pair(tmp_path: Path) -> tuple[IndexServer, SocketVectorIndex, list[int]]:
    seen: list[int] = []
    server = IndexServer(InMemoryVectorIndex(), tmp_path / "owner.sock", on_notify=lambda: seen.append(1))
    await server.start()
    client = SocketVectorIndex(tmp_path / "owner.sock")
    assert await client.health() is None  # connected
    return server, client, seen


async def test_the_notices_of_one_loop_pass_wake_the_owner_once(tmp_path: Path) -> None:
    server, client, seen = await _pair(tmp_path)
    try:
        for _ in range(50):  # a group commit's worth of requests finishing together
            client.notify()
        await client.health()
        assert len(seen) == 1
    finally:
        await client.close()
        await server.close()


async def test_a_notice_in_a_later_pass_is_sent_again(tmp_path: Path) -> None:
    server, client, seen = await _pair(tmp_path)
    try:
        client.notify()
        await asyncio.sleep(0)  # the pass ends: its notice goes
        client.notify()
        client.notify()
        await client.health()
        assert len(seen) == 2
        client.notify()
        await client.health()
        assert len(seen) == 3
    finally:
        await client.close()
        await server.close()


async def test_a_notice_without_a_connection_is_dropped_and_the_next_one_still_goes(tmp_path: Path) -> None:
    server = IndexServer(InMemoryVectorIndex(), tmp_path / "owner.sock", on_notify=lambda: seen.append(1))
    seen: list[int] = []
    await server.start()
    client = SocketVectorIndex(tmp_path / "owner.sock")
    try:
        client.notify()  # not connected yet: best effort, nothing is queued for later
        assert await client.health() is None
        assert seen == []
        client.notify()
        await client.health()
        assert seen == [1]
    finally:
        await client.close()
        await server.close()
