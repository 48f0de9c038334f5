"""Admission control and clients that hang up, driven through the real app's ASGI
callable so the exact messages a server would pass are under the test's control."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from litestar.testing import TestClient

from app.main import create_app
from app.middleware import AdmissionControl
from tests.api.test_health import COMPONENTS, wait_health


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


@pytest.mark.parametrize("patient", [False, True])
async def test_the_next_request_of_a_connection_finds_the_slot_its_last_response_freed(patient):
    """The server starts a keep-alive connection's next request once the last byte of the answer
    is out, possibly before the app has returned (here: work after the response); a client with as
    many connections as the limit must never meet a 503 for that."""
    from app.overload import PatientAdmission

    after_response = asyncio.Event()

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        if scope["path"] == "/first":
            await after_response.wait()

    gate = (PatientAdmission if patient else AdmissionControl)(app, limit=1, exempt=())
    first = Recorder()
    finishing = asyncio.create_task(gate(_scope("GET", "/first"), None, first))
    while len(first.messages) < 2:  # the answer is out; the app is still at work
        await asyncio.sleep(0)
    second = Recorder()
    await gate(_scope("GET", "/second"), None, second)
    assert (first.status, second.status, gate.rejected) == (200, 200, 0)
    after_response.set()
    await finishing
    assert gate.in_flight == 0


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


# -- item 7 with clients that ignore Retry-After: held, not refused again and again ------------------
def _from(client: tuple[str, int], path: str = "/sessions") -> dict:
    scope = _scope("GET", path)
    scope["client"] = client
    return scope


class Blocking:
    """An app whose requests from the ``blocked`` connections wait until released; others answer."""

    def __init__(self, *blocked: tuple[str, int]) -> None:
        self.blocked = {client: asyncio.Event() for client in blocked}
        self.served: list[tuple[str, int]] = []

    async def __call__(self, scope, receive, send):
        event = self.blocked.get(scope["client"])
        if event is not None:
            await event.wait()
        self.served.append(scope["client"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def test_a_client_that_comes_straight_back_after_a_503_is_held_for_the_next_slot():
    from app.overload import PatientAdmission

    first, second, impatient, newcomer = ("10.0.0.1", 1), ("10.0.0.2", 2), ("10.0.0.3", 3), ("10.0.0.4", 4)
    app = Blocking(first, second)
    gate = PatientAdmission(app, limit=2, exempt={"/health"}, hold=3600)  # released below, never times out
    busy = [asyncio.create_task(gate(_from(c), None, Recorder())) for c in (first, second)]
    while gate.in_flight < 2:
        await asyncio.sleep(0)
    refused = Recorder()
    await gate(_from(impatient), None, refused)  # the first refusal is immediate, as before
    assert refused.status == 503 and refused.header(b"retry-after") == b"1"
    again = Recorder()
    holding = asyncio.create_task(gate(_from(impatient), None, again))  # ignores Retry-After
    while gate.waiting < 1:
        await asyncio.sleep(0)
    other = Recorder()
    await gate(_from(newcomer), None, other)  # a newcomer does not jump the line: refused at once
    assert other.status == 503
    assert again.messages == [] and gate.held == 1 and gate.rejected == 2
    app.blocked[first].set()  # a slot frees: it goes to the held request
    await holding
    assert again.status == 200 and app.served[-1] == impatient
    app.blocked[second].set()
    await asyncio.gather(*busy)
    assert (gate.in_flight, gate.waiting, gate.rejected) == (0, 0, 2)


async def test_a_held_request_is_refused_when_its_retry_after_passes_without_a_slot():
    from app.overload import PatientAdmission

    busy_client, impatient = ("10.0.0.1", 1), ("10.0.0.3", 3)
    app = Blocking(busy_client)
    gate = PatientAdmission(app, limit=1, exempt=(), hold=0.01)
    busy = asyncio.create_task(gate(_from(busy_client), None, Recorder()))
    while gate.in_flight < 1:
        await asyncio.sleep(0)
    for _ in range(2):
        refused = Recorder()
        await gate(_from(impatient), None, refused)
        assert refused.status == 503
    assert (gate.held, gate.rejected, gate.in_flight, gate.waiting) == (1, 2, 1, 0)
    app.blocked[busy_client].set()
    await busy
    assert gate.in_flight == 0
    served = Recorder()
    await gate(_from(impatient), None, served)  # a free slot is taken at once, held or not
    assert served.status == 200


def test_health_answers_while_every_slot_is_taken_and_the_app_never_answers(make_settings):
    # The service's own stack with every MAX_IN_FLIGHT slot of its admission control held by
    # requests that never finish; one client is refused and comes back (held). The three health
    # paths still answer through the routes, from the background checks' snapshot.
    application = create_app(make_settings(max_in_flight=2))
    with TestClient(application) as client:
        wait_health(client, lambda body: body["ready"])  # every check has run once

        async def scenario() -> dict[str, Recorder]:
            jammed = Blocking(("10.0.0.1", 1), ("10.0.0.2", 2), ("10.0.0.3", 3))
            admission = application.state.admission  # the one the app's request gates admit through
            tasks = [asyncio.create_task(admission.admit(_from(c), None, Recorder(), jammed))
                     for c in list(jammed.blocked)[:2]]
            while admission.in_flight < 2:
                await asyncio.sleep(0)
            refused = Recorder()
            await application(_from(("10.0.0.3", 3)), None, refused)
            assert refused.status == 503
            tasks.append(asyncio.create_task(application(_from(("10.0.0.3", 3)), None, Recorder())))
            while admission.waiting < 1:  # the impatient client is held in the line
                await asyncio.sleep(0)
            answers = {}
            async with asyncio.timeout(60):  # a bound, not a measurement: a probe must not wait for a slot
                for path in ("/health", "/health/live", "/health/ready"):
                    answers[path] = Recorder()
                    await application(_scope("GET", path), None, answers[path])
            assert admission.in_flight == 2 and jammed.served == []
            for event in jammed.blocked.values():
                event.set()
            await asyncio.gather(*tasks)
            return answers

        answers = asyncio.run(scenario())
    assert all(r.status == 200 for r in answers.values()), {p: (r.status, r.messages[-1].get("body")) for p, r in answers.items()}
    body = json.loads(answers["/health"].messages[-1]["body"])
    assert set(body["components"]) == COMPONENTS and isinstance(body["ready"], bool)
    assert json.loads(answers["/health/live"].messages[-1]["body"]) == {"status": "ok"}
    assert json.loads(answers["/health/ready"].messages[-1]["body"]) == {"status": "ready"}
    assert all(r.header(b"x-request-id") for r in answers.values())


async def test_a_connection_served_from_the_line_queues_again_instead_of_meeting_a_503():
    from app.overload import PatientAdmission

    slow = {"/slow1": asyncio.Event(), "/slow2": asyncio.Event()}

    async def app(scope, receive, send):
        if scope["path"] in slow:
            await slow[scope["path"]].wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    impatient, other = ("10.0.0.3", 3), ("10.0.0.4", 4)
    gate = PatientAdmission(app, limit=1, exempt=(), hold=3600)
    busy = asyncio.create_task(gate(_from(other, "/slow1"), None, Recorder()))
    while gate.in_flight < 1:
        await asyncio.sleep(0)
    refused = Recorder()
    await gate(_from(impatient, "/x"), None, refused)
    assert refused.status == 503
    served = [Recorder(), Recorder()]
    held = asyncio.create_task(gate(_from(impatient, "/x"), None, served[0]))
    while gate.waiting < 1:
        await asyncio.sleep(0)
    slow["/slow1"].set()
    await asyncio.gather(busy, held)
    assert served[0].status == 200 and gate.in_flight == 0
    busy = asyncio.create_task(gate(_from(other, "/slow2"), None, Recorder()))  # the slot is taken again
    while gate.in_flight < 1:
        await asyncio.sleep(0)
    held = asyncio.create_task(gate(_from(impatient, "/x"), None, served[1]))  # its next request
    while gate.waiting < 1:
        await asyncio.sleep(0)
    assert served[1].messages == [] and gate.rejected == 1  # queued again, not refused
    slow["/slow2"].set()
    await asyncio.gather(busy, held)
    assert served[1].status == 200 and (gate.in_flight, gate.held, gate.rejected) == (0, 2, 1)
