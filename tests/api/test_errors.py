"""The one error shape, and the rule that nothing a client sends earns a 500."""

from __future__ import annotations

import json

import httpx
import pytest
from litestar.testing import TestClient

from app.config import Settings
from app.main import create_app

ERROR_KEYS = {"code", "message", "field", "status"}
LEAKS = ("traceback", 'file "', ".py", "sqlite3", "select ", "insert into", "operationalerror", "exception")
TOO_BIG_ID = str(2**64)


def assert_error(response: httpx.Response, status: int, field: str | None = None) -> dict:
    """The response is a ``status`` error in the one shape, naming ``field`` when given, with no
    traceback, source path or SQL in it. Returns the body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == ERROR_KEYS, body
    assert body["status"] == status
    assert isinstance(body["code"], str) and body["code"]
    assert isinstance(body["message"], str) and body["message"]
    if field is not None:
        assert body["field"] == field, body
        if status == 400:  # a 404 names the record ("session 9 does not exist") rather than the field
            assert field.split(".")[-1].split("[")[0] in body["message"], body
    lowered = response.text.lower()
    for leak in LEAKS:
        assert leak not in lowered, (leak, body)
    return body


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One app for the long parametrized sweeps below: every request in them fails before it
    changes anything, so sharing the app only saves start-up time."""
    path = tmp_path_factory.mktemp("errors") / "memory.db"
    settings = Settings(sqlite_path=str(path), vector_index="memory", embedder="fake", embedding_dim=16, port=0)
    with TestClient(create_app(settings)) as test_client:
        session = test_client.post("/sessions", json={"externalId": "shared"}).json()
        test_client.post("/episodes", json={"sessionId": session["id"], "userMessage": "hi", "aiResponse": "yo"})
        test_client.post("/entities", json={"name": "Alice", "type": "person"})
        test_client.post("/summaries", json={"sessionId": session["id"], "content": "greetings"})
        yield test_client


def test_an_unknown_route_is_a_404_in_the_error_shape(client):
    body = assert_error(client.get("/no/such/route"), 404)
    assert body["code"] == "not_found"


def test_a_method_a_route_does_not_have_is_a_405_in_the_error_shape(client, session_id):
    body = assert_error(client.put(f"/sessions/{session_id}", json={"metadata": {}}), 405)
    assert body["code"] == "method_not_allowed"


@pytest.mark.parametrize("path", ["/sessions", "/episodes", "/episodes/batch", "/entities", "/relationships",
                                  "/summaries", "/search", "/context"])
@pytest.mark.parametrize("raw", [b"{bad", b"[1,", b'{"externalId": "x",}', b"\xff\xfe"])
def test_malformed_json_is_a_400_saying_so(shared, path, raw):
    response = shared.post(path, content=raw, headers={"content-type": "application/json"})
    body = assert_error(response, 400)
    assert body["code"] == "malformed_json"
    assert "malformed JSON" in body["message"]


@pytest.mark.parametrize("path", ["/sessions", "/episodes", "/entities", "/relationships", "/summaries"])
def test_an_empty_body_is_a_400_asking_for_one(shared, path):
    response = shared.post(path, content=b"", headers={"content-type": "application/json"})
    body = assert_error(response, 400)
    assert "body is required" in body["message"]


@pytest.mark.parametrize("payload", [[1, 2], "a string", 42, None])
def test_a_body_that_is_not_an_object_is_a_400(shared, payload):
    assert_error(shared.post("/sessions", content=json.dumps(payload), headers={"content-type": "application/json"}),
                 400)


def test_a_body_over_the_one_mebibyte_limit_is_a_413(client, session_id):
    filler = "x" * (1_048_576 + 1)
    payload = json.dumps({"sessionId": session_id, "userMessage": "hi", "aiResponse": "yo", "metadata": {"f": filler}})
    response = client.post("/episodes", content=payload, headers={"content-type": "application/json"})
    body = assert_error(response, 413)
    assert body["code"] == "payload_too_large"


def test_a_body_just_under_the_limit_is_accepted(client, session_id):
    filler = "x" * 1_000_000
    response = client.post("/episodes", json={"sessionId": session_id, "userMessage": "hi", "aiResponse": "yo",
                                              "metadata": {"f": filler}})
    assert response.status_code == 201, response.text[:300]
    assert len(response.json()["metadata"]["f"]) == 1_000_000


ID_ROUTES = [
    ("GET", "/sessions/{}"), ("PATCH", "/sessions/{}"), ("DELETE", "/sessions/{}"),
    ("GET", "/sessions/{}/episodes"), ("GET", "/sessions/{}/summaries"),
    ("GET", "/episodes/{}"), ("PATCH", "/episodes/{}"), ("DELETE", "/episodes/{}"),
    ("GET", "/entities/{}"), ("DELETE", "/entities/{}"), ("GET", "/entities/{}/relationships"),
    ("GET", "/summaries/{}"), ("DELETE", "/summaries/{}"),
]
PATCH_BODIES = {"/sessions/{}": {"metadata": {}}, "/episodes/{}": {"userMessage": "x"}}


def _call(client, method: str, template: str, value: str) -> httpx.Response:
    body = PATCH_BODIES.get(template) if method == "PATCH" else None
    return client.request(method, template.format(value), json=body)


@pytest.mark.parametrize(("method", "template"), ID_ROUTES)
@pytest.mark.parametrize("value", ["abc", "1.5", "1e3", "0x10", "%20", "null"])
def test_a_non_integer_id_is_a_400_or_404_never_a_500(shared, method, template, value):
    response = _call(shared, method, template, value)
    assert response.status_code in (400, 404), response.text
    assert_error(response, response.status_code)


@pytest.mark.parametrize(("method", "template"), ID_ROUTES)
@pytest.mark.parametrize("value", ["0", "-1"])
def test_an_id_below_one_is_a_400(shared, method, template, value):
    assert_error(_call(shared, method, template, value), 400)


@pytest.mark.parametrize(("method", "template"), ID_ROUTES)
@pytest.mark.parametrize("value", [TOO_BIG_ID, "9" * 40])
def test_an_id_beyond_64_bits_is_a_400(shared, method, template, value):
    assert_error(_call(shared, method, template, value), 400)


@pytest.mark.parametrize(("method", "template"), ID_ROUTES)
def test_the_largest_64_bit_id_is_a_plain_404(shared, method, template):
    assert_error(_call(shared, method, template, str(2**63 - 1)), 404)


@pytest.mark.parametrize(("path", "payload", "field"), [
    ("/episodes", {"sessionId": 2**64, "userMessage": "a", "aiResponse": "b"}, "sessionId"),
    ("/summaries", {"sessionId": 2**64, "content": "c"}, "sessionId"),
    ("/relationships", {"fromId": 2**64, "toId": 1, "label": "x"}, "fromId"),
    ("/relationships", {"fromId": 1, "toId": -(2**64), "label": "x"}, "toId"),
])
def test_a_body_id_beyond_64_bits_is_a_400_naming_the_field(client, path, payload, field):
    assert_error(client.post(path, json=payload), 400, field)


def test_a_query_id_beyond_64_bits_is_a_400_naming_the_field(client):
    assert_error(client.get("/episodes/search", params={"q": "hi", "sessionId": TOO_BIG_ID}), 400, "sessionId")


GARBAGE = [{}, {"x": 1}, {"metadata": "nope"}, {"sessionId": "abc"}, {"fromId": [], "toId": {}, "label": 3},
           {"name": None, "type": None}, {"query": 5}, {"episodes": "all of them"}, {"episodes": [1]},
           {"content": "\u0000"}, {"userMessage": "\ud800"}]
POST_ROUTES = ["/sessions", "/episodes", "/episodes/batch", "/entities", "/relationships", "/summaries", "/search",
               "/context"]


@pytest.mark.parametrize("path", POST_ROUTES)
@pytest.mark.parametrize("payload", GARBAGE)
def test_garbage_bodies_get_a_4xx_in_the_error_shape_on_every_post_route(shared, path, payload):
    response = shared.post(path, content=json.dumps(payload), headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert_error(response, response.status_code)


@pytest.mark.parametrize("params", [
    {"q": "hi", "limit": "ten"}, {"q": "hi", "limit": "1e9"}, {"q": "hi", "limit": ""}, {"q": "hi", "match": "ALL"},
    {"q": "hi", "sessionId": "one"}, {"q": "\u0000"}, {"q": "x" * 2001}, {"q": ""},
])
def test_bad_search_parameters_get_a_400(shared, params):
    assert_error(shared.get("/episodes/search", params=params), 400)


def test_a_wrong_type_names_the_field_and_the_expected_type(client):
    body = assert_error(client.post("/sessions", json={"externalId": 5}), 400, "externalId")
    assert "str" in body["message"]


def test_a_missing_required_field_is_named(client):
    body = assert_error(client.post("/sessions", json={"metadata": {}}), 400, "externalId")
    assert "required" in body["message"]


def test_a_nested_missing_field_is_named_with_its_position(client, session_id):
    response = client.post("/episodes/batch", json={"episodes": [
        {"sessionId": session_id, "userMessage": "a", "aiResponse": "b"}, {"sessionId": session_id, "aiResponse": "b"},
    ]})
    assert_error(response, 400, "episodes[1].userMessage")
