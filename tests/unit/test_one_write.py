"""``OneWriteCycle``: a response's head and first body part go to the socket in one write; the
bytes on the wire are the ones uvicorn sends. Real sockets, a real loop, uvicorn's protocol (as
``serve`` runs it); the transport is wrapped only to count its writes."""

from __future__ import annotations

import contextlib

import pytest

from app.main import create_app
from tests.support.protocol_wire import received_until, wired


class _CountedWrites:
    """The protocol's transport, with every write recorded."""

    def __init__(self, transport) -> None:
        self.transport, self.writes = transport, []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name):
        return getattr(self.transport, name)


@contextlib.asynccontextmanager
async def _serving(app):
    """(protocol, client socket, counted transport) for ``app`` on a real socket pair."""
    async with wired(app) as (protocol, client, _state):
        counted = protocol.transport = _CountedWrites(protocol.transport)
        yield protocol, client, counted


def _one_response(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0)
    return bool(sep) and len(body) >= length


@pytest.fixture
async def api(make_settings):
    async with _serving(create_app(make_settings())) as served:
        yield served


async def test_an_api_answer_is_one_write_holding_its_head_and_body(api):
    protocol, client, counted = api
    protocol.data_received(b"GET /episodes/999999 HTTP/1.1\r\nhost: x\r\n\r\n")
    received = await received_until(client, _one_response)
    assert received.startswith(b"HTTP/1.1 404 ")
    assert b'"episode 999999' in received or b"999999" in received
    assert counted.writes == [received]


async def test_a_head_answer_is_written_without_a_body_and_the_connection_serves_the_next(api):
    protocol, client, counted = api
    protocol.data_received(b"HEAD /health?full=1 HTTP/1.1\r\nhost: x\r\n\r\n")
    head = await received_until(client, lambda data: b"\r\n\r\n" in data)
    assert head.startswith(b"HTTP/1.1 ") and head.endswith(b"\r\n\r\n")
    assert counted.writes == [head]
    protocol.data_received(b"GET /episodes/1 HTTP/1.1\r\nhost: x\r\n\r\n")
    assert (await received_until(client, _one_response)).startswith(b"HTTP/1.1 404 ")
    assert len(counted.writes) == 2


async def _streamed(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    for part in (b"one ", b"two ", b"three"):
        await send({"type": "http.response.body", "body": part, "more_body": part != b"three"})


async def test_a_streamed_body_sends_its_first_part_with_the_head_and_the_rest_as_they_come():
    async with _serving(_streamed) as (protocol, client, counted):
        protocol.data_received(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        received = await received_until(client, lambda data: data.endswith(b"0\r\n\r\n"))
        assert received.startswith(b"HTTP/1.1 200 OK\r\n") and b"transfer-encoding: chunked" in received
        assert received.endswith(b"4\r\none \r\n4\r\ntwo \r\n5\r\nthree\r\n0\r\n\r\n")
        assert len(counted.writes) == 3 and counted.writes[0].endswith(b"4\r\none \r\n")
        assert b"".join(counted.writes) == received


async def _echo(scope, receive, send):
    message = await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(message["body"]))]})
    await send({"type": "http.response.body", "body": message["body"]})


async def test_a_100_continue_goes_out_before_the_answer_is_started():
    async with _serving(_echo) as (protocol, client, counted):
        protocol.data_received(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n")
        interim = await received_until(client, lambda data: b"100 Continue" in data)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n" and counted.writes == [interim]
        protocol.data_received(b"hello")
        answer = await received_until(client, _one_response)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nhello")
        assert counted.writes == [interim, answer]


async def _fails_after_starting(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"10")]})
    raise RuntimeError("the app broke after starting its answer")


async def test_an_app_that_fails_after_starting_gets_its_head_written_before_the_connection_closes():
    async with _serving(_fails_after_starting) as (protocol, client, counted):
        protocol.data_received(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        received = await received_until(client, lambda data: False)  # until the server closes
        assert received.startswith(b"HTTP/1.1 200 OK\r\n") and received.endswith(b"\r\n\r\n")
        assert counted.writes == [received]
        assert counted.transport.is_closing()


async def test_a_connection_close_answer_is_written_whole_before_the_close(api):
    protocol, client, counted = api
    protocol.data_received(b"GET /episodes/5 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    received = await received_until(client, lambda data: False)
    assert received.startswith(b"HTTP/1.1 404 ") and _one_response(received)
    assert counted.writes == [received]
