"""One log line per request, carrying a request id the caller can correlate with."""

from __future__ import annotations

import json
import logging
import multiprocessing
import re

import pytest
from litestar.testing import TestClient

from app.logs import JsonFormatter
from app.main import create_app
from app.middleware import MAX_REQUEST_ID, new_request_id


def _request_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "nexusai.request"]


def test_each_request_logs_one_line_with_method_route_template_status_and_duration(client, session_id, caplog):
    caplog.set_level(logging.INFO, logger="nexusai.request")
    response = client.get(f"/sessions/{session_id}")
    [line] = _request_lines(caplog)
    assert (line.method, line.path, line.status) == ("GET", "/sessions/{session_id}", 200)
    assert line.duration_ms >= 0
    assert line.request_id == response.headers["x-request-id"]


def test_a_sane_incoming_request_id_is_honoured_and_returned(client, caplog):
    caplog.set_level(logging.INFO, logger="nexusai.request")
    response = client.get("/sessions", headers={"X-Request-ID": "orchestrator-7f3a.42"})
    assert response.headers["x-request-id"] == "orchestrator-7f3a.42"
    assert [r.request_id for r in _request_lines(caplog)] == ["orchestrator-7f3a.42"]


@pytest.mark.parametrize("bad", ["x" * (MAX_REQUEST_ID + 1), "has space", "tab\there", ""])
def test_an_insane_request_id_is_replaced_by_a_fresh_one(client, bad):
    returned = client.get("/sessions", headers={"X-Request-ID": bad}).headers["x-request-id"]
    assert returned != bad and 0 < len(returned) <= MAX_REQUEST_ID


def test_requests_without_an_id_get_distinct_ones(client):
    ids = {client.get("/sessions").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3


def test_an_unrouted_path_is_logged_under_one_template_not_the_raw_path(client, caplog):
    caplog.set_level(logging.INFO, logger="nexusai.request")
    assert client.get("/no/such/thing/123").status_code == 404
    [line] = _request_lines(caplog)
    assert (line.path, line.status) == ("<unmatched>", 404)


def test_client_errors_are_logged_with_their_status(client, caplog):
    caplog.set_level(logging.INFO, logger="nexusai.request")
    client.get("/sessions/999")
    [line] = _request_lines(caplog)
    assert (line.status, line.levelno) == (404, logging.INFO)


def test_a_server_error_is_logged_at_error_level_with_the_request_id(make_settings, caplog):
    app = create_app(make_settings())

    class BrokenStore:
        async def list_sessions(self, limit, offset):
            raise RuntimeError("disk on fire")

    with TestClient(app) as client:
        app.state.container.sessions()._store = BrokenStore()
        caplog.set_level(logging.INFO)
        response = client.get("/sessions", headers={"X-Request-ID": "trace-500"})
    assert response.status_code == 500
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and all(getattr(r, "request_id", None) == "trace-500" for r in errors)
    assert "disk on fire" not in response.text


def test_json_lines_carry_the_request_fields(client, caplog):
    caplog.set_level(logging.INFO, logger="nexusai.request")
    client.post("/sessions", json={"externalId": "json-log"}, headers={"X-Request-ID": "rid-1"})
    [line] = _request_lines(caplog)
    entry = json.loads(JsonFormatter().format(line))
    assert {k: entry[k] for k in ("request_id", "method", "path", "status")} == {
        "request_id": "rid-1", "method": "POST", "path": "/sessions", "status": 201}
    assert isinstance(entry["duration_ms"], float)


def _id_in_child(queue) -> None:
    queue.put(new_request_id())


def test_fresh_ids_are_32_hex_digits_and_a_forked_worker_draws_its_own_prefix():
    ids = [new_request_id() for _ in range(1000)]
    assert len(set(ids)) == 1000 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_id_in_child, args=(queue,))
    child.start()
    from_child = queue.get(timeout=30)
    child.join(timeout=30)
    # Same counter position is possible in a child forked now; the per-process prefix is what differs.
    assert re.fullmatch(r"[0-9a-f]{32}", from_child) and from_child[:16] != ids[-1][:16]
