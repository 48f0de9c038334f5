"""Hostile clients: one datetime rule, JSON-only bodies, opt-in CORS, unknown fields,
strict path ids, Allow on 405, authentication before routing, and a start-up warning."""

from __future__ import annotations

import logging

import pytest
from litestar.testing import TestClient

from app.main import create_app
from domain.models import format_timestamp, parse_timestamp

KEY = "hardening-key-123"
EPISODE = {"userMessage": "u", "aiResponse": "a"}


def _error(response, status: int, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == status
    if field is not None:
        assert body["field"] == field, body
        assert field.split(".")[-1] in body["message"]
    return body


# -- item 4: datetimes ------------------------------------------------------------------------------
@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_created_at_whose_utc_instant_leaves_the_range_is_a_400(client, session_id, moment):
    body = {"sessionId": session_id, **EPISODE, "createdAt": moment}
    _error(client.post("/episodes", json=body), 400, "createdAt")
    _error(client.post("/episodes/batch", json={"episodes": [body]}), 400)
    assert client.get(f"/sessions/{session_id}/episodes").json()["total"] == 0


@pytest.mark.parametrize("field", ["since", "until"])
def test_since_or_until_out_of_range_is_a_400(client, field):
    _error(client.post("/search", json={"query": "x", field: "0001-01-01T00:00:00+01:00"}), 400, field)


@pytest.mark.parametrize(("since", "until"), [("2020-01-01T00:00:00Z", "2030-01-01T00:00:00"),
                                              ("2020-01-01T00:00:00", "2030-01-01T00:00:00+02:00")])
def test_aware_and_naive_bounds_mix_because_naive_means_utc(client, session_id, since, until):
    client.post("/episodes", json={"sessionId": session_id, **EPISODE, "createdAt": "2025-06-01T00:00:00Z"})
    response = client.post("/search", json={"query": "u", "since": since, "until": until})
    assert response.status_code == 200, response.text
    naive_after = client.post("/search", json={"query": "u", "since": "2025-06-01T00:00:01", "until": until})
    assert naive_after.status_code == 200 and naive_after.json()["hits"] == []


def test_years_below_1000_are_written_with_four_digits(client, session_id):
    body = {"sessionId": session_id, **EPISODE, "createdAt": "0999-03-04T05:06:07.891+00:00"}
    created = client.post("/episodes", json=body).json()
    assert created["createdAt"] == "0999-03-04T05:06:07.891Z"
    assert client.get(f"/episodes/{created['id']}").json()["createdAt"] == "0999-03-04T05:06:07.891Z"
    assert format_timestamp(parse_timestamp("0001-01-01T00:00:00Z")) == "0001-01-01T00:00:00.000Z"


def test_a_created_at_with_an_offset_is_stored_as_its_utc_instant(client, session_id):
    created = client.post("/episodes", json={"sessionId": session_id, **EPISODE,
                                             "createdAt": "2025-03-01T14:00:00+02:00"}).json()
    assert created["createdAt"] == "2025-03-01T12:00:00.000Z"
    assert client.get(f"/episodes/{created['id']}").json()["createdAt"] == "2025-03-01T12:00:00.000Z"


def test_a_naive_created_at_is_taken_as_utc(client, session_id):
    created = client.post("/episodes", json={"sessionId": session_id, **EPISODE,
                                             "createdAt": "2024-02-29T12:00:00"}).json()
    assert created["createdAt"] == "2024-02-29T12:00:00.000Z"


# -- item 5: only JSON bodies; CORS opt-in; warning ------------------------------------------------
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
def test_a_body_that_is_not_declared_json_is_a_415_and_writes_nothing(client, content_type):
    headers = {"content-type": content_type} if content_type else {}
    response = client.post("/sessions", content=b'{"externalId": "from-a-web-page"}', headers=headers)
    _error(response, 415)
    entity = client.post("/entities", content=b'{"name": "n", "type": "t"}', headers=headers)
    _error(entity, 415)
    assert client.get("/sessions").json()["total"] == 0
    assert client.get("/entities/search", params={"name": "n"}).json() == []


def test_json_with_a_charset_or_a_json_suffix_is_accepted(client):
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        response = client.post("/sessions", content=b'{"externalId": "%s"}' % content_type.encode(),
                               headers={"content-type": content_type})
        assert response.status_code == 201, response.text


def test_cors_is_off_by_default(client):
    response = client.options("/sessions", headers={"Origin": "https://evil.example",
                                                     "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in response.headers
    simple = client.get("/sessions", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in simple.headers


def test_configured_cors_origins_get_preflights_answered_even_with_a_key(make_settings):
    settings = make_settings(cors_origins=("https://app.example",), memory_api_key=KEY)
    with TestClient(create_app(settings)) as client:
        preflight = client.options("/sessions", headers={"Origin": "https://app.example",
                                                         "Access-Control-Request-Method": "POST",
                                                         "Access-Control-Request-Headers": "authorization"})
        assert preflight.status_code in (200, 204)
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        other = client.options("/sessions", headers={"Origin": "https://evil.example",
                                                     "Access-Control-Request-Method": "POST"})
        assert other.headers.get("access-control-allow-origin") != "https://evil.example"
        assert client.get("/sessions", headers={"Origin": "https://app.example"}).status_code == 401


@pytest.mark.parametrize(("host", "key", "warns"), [("0.0.0.0", None, True), ("192.168.1.5", None, True),
                                                     ("::", None, True), ("0.0.0.0", KEY, False),
                                                     ("127.0.0.1", None, False), ("localhost", None, False),
                                                     ("::1", None, False)])
def test_start_up_warns_when_the_network_can_reach_an_unkeyed_service(make_settings, caplog, host, key, warns):
    with caplog.at_level(logging.WARNING, logger="nexusai.app"):
        create_app(make_settings(host=host, memory_api_key=key))
    assert any("MEMORY_API_KEY" in r.getMessage() for r in caplog.records) is warns


# -- item 6: unknown fields, path ids, Allow, auth before routing ----------------------------------
UNKNOWN_FIELD_BODIES = [
    ("POST", "/sessions", {"externalId": "x", "extra": 1}, "extra"),
    ("PATCH", "/sessions/{sid}", {"metadata": {}, "externalId": "y"}, "externalId"),
    ("POST", "/episodes", {"sessionId": "{sid}", **EPISODE, "session_id": 2}, "session_id"),
    ("PATCH", "/episodes/{eid}", {"sessionId": 2}, "sessionId"),
    ("POST", "/episodes/batch", {"episodes": [{"sessionId": "{sid}", **EPISODE, "tokens": 3}]}, "tokens"),
    ("POST", "/entities", {"name": "n", "type": "t", "description": "d"}, "description"),
    ("POST", "/relationships", {"fromId": 1, "toId": 2, "label": "l", "weight": 2}, "weight"),
    ("DELETE", "/relationships", {"fromId": 1, "toId": 2, "label": "l", "id": 1}, "id"),
    ("POST", "/summaries", {"sessionId": "{sid}", "content": "c", "title": "t"}, "title"),
    ("POST", "/search", {"query": "x", "filters": {"sessionId": 1}}, "filters"),
    # minScore is a field; its misspellings stay unknown
    ("POST", "/search", {"query": "x", "min_score": 0.5}, "min_score"),
    ("POST", "/search", {"query": "x", "filter": {"meta": {}}}, "filter.meta"),
    ("POST", "/context", {"query": "x", "sessionId": "{sid}", "tokenBudget": 10, "maxTokens": 5}, "maxTokens"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), UNKNOWN_FIELD_BODIES)
def test_an_unknown_field_in_any_body_is_a_400_naming_it(client, session_id, method, path, body, field):
    episode = client.post("/episodes", json={"sessionId": session_id, **EPISODE}).json()["id"]

    def fill(value):
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return {"{sid}": session_id, "{eid}": episode}.get(value, value) if isinstance(value, str) else value

    response = client.request(method, path.format(sid=session_id, eid=episode), json=fill(body))
    error = _error(response, 400)
    assert field in error["message"] and error["field"].endswith(field)
    assert client.get(f"/episodes/{episode}").json()["sessionId"] == session_id


@pytest.mark.parametrize("value", ["+1", "%EF%BC%91", "%D9%A1", "1_0", "%201", "1%20", "-0", "0x1"])
def test_ids_are_ascii_digits_only(client, session_id, value):
    assert client.get(f"/sessions/{value}").status_code in (400, 404)
    assert client.get(f"/sessions/{session_id}").status_code == 200


@pytest.mark.parametrize("suffix", [".0", "e0", ".0e0", "0e-1", "E0"])
def test_an_id_in_float_notation_names_no_record(client, session_id, suffix):
    # "1.0" and "1e0" are numbers equal to 1 but not ids: they must not read, change or delete record 1.
    episode = client.post("/episodes", json={"sessionId": session_id, **EPISODE}).json()["id"]
    for path in (f"/sessions/{session_id}{suffix}", f"/episodes/{episode}{suffix}",
                 f"/sessions/{session_id}{suffix}/episodes"):
        assert client.get(path).status_code == 404, path
        assert client.delete(path).status_code in (404, 405), path
    assert client.patch(f"/sessions/{session_id}{suffix}", json={"metadata": {"a": 1}}).status_code == 404
    assert client.get(f"/sessions/{session_id}").json()["metadata"] == {}
    assert client.get(f"/episodes/{episode}").status_code == 200


@pytest.mark.parametrize("change", [{"userMessage": "", "aiResponse": " "}, {"aiResponse": "\n"}])
def test_a_patch_cannot_empty_both_sides_of_an_episode(client, session_id, change):
    # POST refuses an episode with nothing on either side; PATCH must not make one.
    episode = client.post("/episodes", json={"sessionId": session_id, "userMessage": " ", "aiResponse": "kept"}).json()
    _error(client.patch(f"/episodes/{episode['id']}", json=change), 400, "userMessage")
    assert client.get(f"/episodes/{episode['id']}").json()["aiResponse"] == "kept"
    assert client.patch(f"/episodes/{episode['id']}", json={"userMessage": "now here", "aiResponse": ""}).status_code == 200


def _nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/sessions", {"externalId": "deep"}), ("PATCH", "/sessions/{sid}", {}),
    ("POST", "/episodes", {"sessionId": "{sid}", **EPISODE}), ("PATCH", "/episodes/{eid}", {}),
    ("POST", "/entities", {"name": "n", "type": "t"}), ("POST", "/summaries", {"sessionId": "{sid}", "content": "c"}),
])
def test_metadata_nested_deeper_than_the_limit_is_a_400_and_stored_records_stay_readable(
        client, session_id, method, path, body):
    # Metadata that decodes but nests near the recursion limit was stored, then every list holding it
    # answered "nested too deeply": one client could break GET /sessions for all.
    episode = client.post("/episodes", json={"sessionId": session_id, **EPISODE}).json()["id"]
    fill = {k: session_id if v == "{sid}" else v for k, v in body.items()}
    target = path.format(sid=session_id, eid=episode)
    _error(client.request(method, target, json={**fill, "metadata": _nested(129)}), 400, "metadata")
    assert client.request(method, target, json={**fill, "metadata": _nested(128)}).status_code in (200, 201)
    for listing in ("/sessions?limit=1000", f"/sessions/{session_id}/episodes?limit=1000", "/entities/by-type/t",
                    f"/sessions/{session_id}/summaries"):
        assert client.get(listing).status_code == 200, listing


def test_a_405_says_which_methods_are_allowed(client, session_id):
    response = client.put(f"/sessions/{session_id}", json={})
    _error(response, 405)
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert {"GET", "PATCH", "DELETE"} <= allowed and "PUT" not in allowed


@pytest.mark.parametrize(("method", "path"), [("GET", "/no-such-route"), ("PUT", "/sessions/1"),
                                              ("GET", "/sessions/abc"), ("POST", "/health/nope"),
                                              ("GET", "/schema/nope")])  # the docs pages themselves are open
def test_with_a_key_set_unknown_routes_and_methods_answer_401_before_routing(make_settings, method, path):
    with TestClient(create_app(make_settings(memory_api_key=KEY))) as client:
        response = client.request(method, path)
        _error(response, 401)
        assert "allow" not in response.headers
        authorized = client.request(method, path, headers={"Authorization": f"Bearer {KEY}"})
        assert authorized.status_code != 401


@pytest.mark.parametrize("value", ["0", 0, 1.5, "1700000000", "yesterday", "2025-01-31", True])
def test_a_date_time_is_rfc_3339_text_never_a_number_or_a_number_in_a_string(client, session_id, value):
    # Lax body conversion once read 0 and "0" as Unix time: a search "since 1970" answered 200.
    _error(client.post("/search", json={"query": "u", "since": value}), 400, "since")
    _error(client.post("/search", json={"query": "u", "until": value}), 400, "until")
    _error(client.post("/episodes", json={"sessionId": session_id, **EPISODE, "createdAt": value}), 400, "createdAt")
