"""``HealthFirstProtocol``: a probe is answered in the read callback that parsed it, before the
event loop runs anything queued ahead of it; every other request (and a probe that must wait)
runs as a task, as uvicorn runs it. Real sockets, a real loop, the real app."""

from __future__ import annotations

import asyncio
import socket

import pytest

from app.health_gate import HealthGate, _Continued
from app.main import create_app
from tests.support.protocol_wire import received_until, wired


@pytest.fixture
async def wire(make_settings):
    async with wired(create_app(make_settings())) as served:
        yield served


def _received(client: socket.socket) -> bytes:
    try:
        return client.recv(65536)
    except BlockingIOError:
        return b""


async def _answer(client: socket.socket) -> bytes:
    for _ in range(500):
        if data := _received(client):
            return data
        await asyncio.sleep(0.01)
    raise AssertionError("no answer")


async def _answered_as_a_task(protocol, client, state, request: bytes) -> bytes:
    """Hand ``request`` to the protocol: nothing is answered in the callback, one task answers it."""
    protocol.data_received(request)
    assert _received(client) == b""
    assert len(state.tasks) == 1
    return await _answer(client)


@pytest.mark.parametrize("path", ["/health", "/health/live", "/health/ready"])
async def test_a_probe_is_answered_before_the_read_callback_returns(wire, path):
    protocol, client, state = wire
    protocol.data_received(f"GET {path} HTTP/1.1\r\nHost: memory\r\nX-Request-Id: probe-1\r\n\r\n".encode())
    answer = _received(client)  # no loop step in between: nothing queued could have run
    assert answer.startswith(b"HTTP/1.1 200 ") or (path == "/health/ready" and answer.startswith(b"HTTP/1.1 503 "))
    assert b"x-request-id: probe-1" in answer.lower()
    assert not state.tasks
    # the connection stays usable: a second probe on it is answered the same way
    protocol.data_received(b"GET /health/live HTTP/1.1\r\nHost: memory\r\n\r\n")
    assert _received(client).startswith(b"HTTP/1.1 200 ")


async def test_any_other_request_runs_as_a_task_after_the_callback(wire):
    answer = await _answered_as_a_task(*wire, b"GET /nowhere HTTP/1.1\r\nHost: memory\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 404 ")


async def test_a_probe_the_gate_passes_on_runs_as_a_task(wire):
    # An Origin header (CORS) sends even a probe through the whole app
    answer = await _answered_as_a_task(
        *wire, b"GET /health/live HTTP/1.1\r\nHost: memory\r\nOrigin: http://elsewhere\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 ")


async def test_a_probe_waits_as_a_task_while_the_transport_cannot_take_writes(wire):
    protocol, client, state = wire
    protocol.pause_writing()
    protocol.data_received(b"GET /health/live HTTP/1.1\r\nHost: memory\r\n\r\n")
    assert _received(client) == b""
    assert len(state.tasks) == 1
    protocol.resume_writing()
    assert (await _answer(client)).startswith(b"HTTP/1.1 200 ")


async def test_a_coroutine_started_by_hand_is_finished_by_its_continuation():
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()

    async def two_waits() -> str:
        return await first + await second

    coro = two_waits()
    waiting_on = coro.send(None)
    assert waiting_on is first
    task = loop.create_task(_Continued(coro, waiting_on).wait())
    await asyncio.sleep(0)
    first.set_result("a")
    await asyncio.sleep(0)
    assert not task.done()
    second.set_result("b")
    assert await task == "ab"


async def test_cancelling_the_continuation_cancels_the_coroutine_where_it_waits():
    loop = asyncio.get_running_loop()
    never = loop.create_future()
    seen: list[str] = []

    async def waits_forever() -> None:
        try:
            await never
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    coro = waits_forever()
    task = loop.create_task(_Continued(coro, coro.send(None)).wait())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


async def test_probes_pipelined_behind_a_request_are_all_answered_without_nesting_deeper_and_deeper(wire):
    protocol, client, state = wire
    probes = 400  # each answered as the one before completes: nested, they would pass the recursion limit
    protocol.data_received(b"GET /nowhere HTTP/1.1\r\nHost: memory\r\n\r\n"
                           + b"GET /health/live HTTP/1.1\r\nHost: memory\r\n\r\n" * probes)
    received = await received_until(client, lambda got: got.count(b"HTTP/1.1 ") == probes + 1)
    assert received.startswith(b"HTTP/1.1 404 ")
    assert received.count(b"HTTP/1.1 200 ") == probes
    assert b"HTTP/1.1 500 " not in received


async def test_a_request_pipelined_behind_an_answered_probe_is_not_cut_off_by_the_keep_alive_timer():
    # The probe's answer, complete while the bytes are still being parsed, arms the keep-alive
    # timer; the request parsed right after it must disarm it, or the idle timeout closes the
    # connection under a request still running.
    async def slow(scope, receive, send):
        await asyncio.sleep(0.4)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"slow"})

    async with wired(HealthGate(slow, monitor=None, api_key=None), timeout_keep_alive=0.1) as (protocol, client, _):
        protocol.data_received(b"GET /health/live HTTP/1.1\r\nHost: memory\r\n\r\n"
                               b"GET /slow HTTP/1.1\r\nHost: memory\r\n\r\n")
        received = await received_until(client, lambda got: got.endswith(b"slow") or protocol.transport.is_closing())
        assert received.count(b"HTTP/1.1 200 ") == 2 and received.endswith(b"slow")


async def test_a_probe_that_asks_to_close_is_answered_and_the_connection_closed(wire):
    protocol, client, state = wire
    protocol.data_received(b"GET /health/live HTTP/1.0\r\nHost: memory\r\n\r\n")
    answer = _received(client)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b'{"status":"ok"}')
    assert protocol.transport.is_closing()


async def test_of_many_probes_in_one_read_only_the_first_is_answered_in_place(wire):
    # A client packing thousands of probes into one read must not hold the loop for all of them:
    # the rest are answered one by one as tasks, as uvicorn answers pipelined requests.
    protocol, client, state = wire
    probes = 300
    protocol.data_received(b"GET /health/live HTTP/1.1\r\nHost: memory\r\n\r\n" * probes)
    assert _received(client).count(b"HTTP/1.1 200 ") == 1
    received = await received_until(client, lambda got: got.count(b"HTTP/1.1 200 ") == probes - 1)
    assert received.count(b"HTTP/1.1 200 ") == probes - 1


@pytest.mark.parametrize("probe", [
    b"GET /health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",  # uvicorn closes every HTTP/1.0 connection
    b"GET /health/live HTTP/1.1\r\nHost: memory\r\nConnection: close\r\n\r\n",
])
async def test_a_request_sent_behind_a_probe_that_closed_the_connection_is_not_run(probe):
    started: list[str] = []

    async def record(scope, receive, send):
        started.append(f"{scope['method']} {scope['path']}")
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async with wired(HealthGate(record, monitor=None, api_key=None)) as (protocol, client, state):
        protocol.data_received(probe + b"DELETE /memories/1 HTTP/1.1\r\nHost: memory\r\n\r\n")
        await asyncio.sleep(0.05)
        await asyncio.gather(*state.tasks, return_exceptions=True)
        assert _received(client).startswith(b"HTTP/1.1 200 ")
        assert protocol.transport.is_closing()
        assert started == []  # the DELETE never reached the app
