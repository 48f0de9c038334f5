"""Admission control and clients that hang up (issue 11), driven through the real app's ASGI
callable so the exact messages a server would pass are under the test's control."""

from __future__ import annotations

import asyncio
import logging

import pytest
from litestar.testing import TestClient

from app.main import create_app
from app.middleware import AdmissionControl


def _scope(method: str, path: str, headers: list[tuple[bytes, bytes]] = ()) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": list(headers), "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 3002), "state": {}}


class Recorder:
    def __init__(self) -> None:
        self.messages: list[dict] = []

    async def __call__(self, message: dict) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int | None:
        return next((m["status"] for m in self.messages if m["type"] == "http.response.start"), None)

    def header(self, name: bytes) -> bytes | None:
        start = next(m for m in self.messages if m["type"] == "http.response.start")
        return next((v for k, v in start["headers"] if k == name), None)


# -- item 7: admission control ---------------------------------------------------------------------
async def test_requests_beyond_the_limit_get_503_with_retry_after_at_once_and_health_passes():
    release = asyncio.Event()
    entered = 0

    async def slow_app(scope, receive, send):
        nonlocal entered
        entered += 1
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    gate = AdmissionControl(slow_app, limit=2, exempt={"/health", "/metrics"})
    held = [asyncio.create_task(gate(_scope("GET", "/sessions"), None, Recorder())) for _ in range(2)]
    while entered < 2:
        await asyncio.sleep(0)
    refused = Recorder()
    await gate(_scope("POST", "/episodes"), None, refused)  # returns without waiting for the held ones
    assert refused.status == 503 and refused.header(b"retry-after") == b"1"
    assert b'"overloaded"' in refused.messages[-1]["body"]
    health = asyncio.create_task(gate(_scope("GET", "/health"), None, Recorder()))
    while entered < 3:
        await asyncio.sleep(0)
    assert (gate.in_flight, gate.rejected) == (2, 1)
    release.set()
    await asyncio.gather(*held, health)
    assert gate.in_flight == 0
    again = Recorder()
    await gate(_scope("GET", "/sessions"), None, again)
    assert again.status == 200


async def test_a_slow_upload_holds_no_slot_until_its_body_has_arrived():
    # Clients trickling bodies (or stalling mid-upload) must not use up MAX_IN_FLIGHT and make the
    # service refuse everyone else: a request counts once the body it announced is in.
    more = asyncio.Event()
    received: list[bytes] = []

    async def app(scope, receive, send):
        if scope["method"] == "POST":
            while True:
                message = await receive()
                received.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    chunks = [{"type": "http.request", "body": b'{"a": ', "more_body": True},
              {"type": "http.request", "body": b"1}", "more_body": False}]

    async def trickle():
        if len(chunks) == 1:
            await more.wait()
        return chunks.pop(0)

    gate = AdmissionControl(app, limit=1, exempt=())
    upload = Recorder()
    uploading = asyncio.create_task(gate(_scope("POST", "/sessions", [(b"content-length", b"8")]), trickle, upload))
    while len(chunks) == 2:
        await asyncio.sleep(0)
    other = Recorder()
    await gate(_scope("GET", "/sessions"), None, other)
    assert other.status == 200 and gate.rejected == 0
    more.set()
    await uploading
    assert upload.status == 200 and b"".join(received) == b'{"a": 1}' and gate.in_flight == 0


async def test_a_zero_limit_turns_admission_control_off():
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    gate = AdmissionControl(app, limit=0, exempt=())
    recorder = Recorder()
    await gate(_scope("GET", "/x"), None, recorder)
    assert recorder.status == 204 and gate.in_flight == 0


def test_overload_refusals_are_counted_in_metrics(make_settings):
    with TestClient(create_app(make_settings(max_in_flight=5))) as client:
        text = client.get("/metrics").text
    assert "memory_http_rejected_overload_total 0.0" in text
    assert "memory_http_requests_in_flight" in text


# -- item 9: a client that disconnects mid-upload ----------------------------------------------------
@pytest.fixture
def app(make_settings):
    application = create_app(make_settings())
    with TestClient(application):  # runs the lifespan: stores open, checks running
        yield application


async def _hang_up_mid_upload(application) -> Recorder:
    chunks = [{"type": "http.request", "body": b'{"externalId": "half', "more_body": True},
              {"type": "http.disconnect"}]

    async def receive():
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    recorder = Recorder()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"500")]
    await application(_scope("POST", "/sessions", headers), receive, recorder)
    return recorder


def test_a_client_that_hangs_up_mid_upload_is_not_a_server_error(app, caplog):
    with caplog.at_level(logging.DEBUG):
        asyncio.run(_hang_up_mid_upload(app))
    request_lines = [r for r in caplog.records if r.name == "nexusai.request"]
    assert request_lines and all(r.levelno < logging.ERROR for r in request_lines)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(getattr(r, "status", None) == 499 for r in request_lines)
    metrics = app.state.metrics.registry
    assert metrics.get_sample_value("memory_http_client_disconnects_total",
                                    {"method": "POST", "route": "/sessions"}) == 1.0
    assert metrics.get_sample_value("memory_http_requests_total",
                                    {"method": "POST", "route": "/sessions", "status": "500"}) is None
