"""Hostile and broken input: every case is a clear 4xx in the one error shape, never a 500."""

from __future__ import annotations

import json

import pytest

JSON = {"content-type": "application/json"}
MAX_ID = 2**63 - 1


def _assert_clear_error(response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) >= {"code", "message", "status"}
    assert body["status"] == status
    assert "Traceback" not in response.text and "sqlite" not in response.text.lower()
    return body


def test_a_body_over_the_limit_is_a_413(client, session_id):
    big = {"sessionId": session_id, "userMessage": "x" * 2_000_000, "aiResponse": "y"}
    _assert_clear_error(client.post("/episodes", content=json.dumps(big), headers=JSON), 413)


def test_a_body_over_the_limit_without_a_content_length_is_a_413(client, session_id):
    def chunks():
        yield b'{"sessionId": 1, "userMessage": "'
        for _ in range(40):
            yield b"x" * 65536
        yield b'", "aiResponse": "y"}'

    _assert_clear_error(client.post("/episodes", content=chunks(), headers=JSON), 413)


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_json_is_a_400(client, depth):
    nested = "[" * depth + "]" * depth
    body = f'{{"externalId": "deep", "metadata": {{"a": {nested}}}}}'
    assert _assert_clear_error(client.post("/sessions", content=body, headers=JSON), 400)["code"] == "malformed_json"


def test_moderately_nested_metadata_is_stored_verbatim(client):
    metadata: dict = {"leaf": "x"}
    for level in range(50):
        metadata = {f"level{level}": [metadata, level]}
    response = client.post("/sessions", json={"externalId": "nested", "metadata": metadata})
    assert response.status_code == 201
    assert client.get(f"/sessions/{response.json()['id']}").json()["metadata"] == metadata


def test_a_huge_flat_metadata_object_within_the_limit_is_stored(client):
    metadata = {f"k{n}": n for n in range(20_000)}
    response = client.post("/sessions", json={"externalId": "wide", "metadata": metadata})
    assert response.status_code == 201
    assert client.get(f"/sessions/{response.json()['id']}").json()["metadata"] == metadata


@pytest.mark.parametrize("field", ["userMessage", "aiResponse"])
def test_a_nul_byte_in_episode_text_is_a_400_naming_the_field(client, session_id, field):
    body = {"sessionId": session_id, "userMessage": "a", "aiResponse": "b", field: "before\x00after"}
    assert _assert_clear_error(client.post("/episodes", json=body), 400)["field"] == field


def test_a_nul_byte_in_an_external_id_is_a_400(client):
    assert _assert_clear_error(client.post("/sessions", json={"externalId": "a\x00b"}), 400)["field"] == "externalId"


@pytest.mark.parametrize("path,body", [
    ("/entities", {"name": "a\x00", "type": "person"}),
    ("/entities", {"name": "a", "type": "per\x00son"}),
    ("/search", {"query": "\x00"}),
])
def test_a_nul_byte_in_any_text_field_is_a_400(client, path, body):
    _assert_clear_error(client.post(path, json=body), 400)


def test_a_nul_byte_in_a_search_query_is_a_400(client):
    _assert_clear_error(client.get("/episodes/search", params={"q": "a\x00b"}), 400)


@pytest.mark.parametrize("raw", [b'{"externalId": "\xff\xfe"}', b'{"externalId": "ok", "metadata": {"\xc3\x28": 1}}',
                                 b"\xef\xbb\xbf\x80"])
def test_invalid_utf8_in_a_body_is_a_400(client, raw):
    assert _assert_clear_error(client.post("/sessions", content=raw, headers=JSON), 400)["code"] == "malformed_json"


@pytest.mark.parametrize("raw", [b"{", b'{"externalId": }', b"NaN", b'{"externalId": "x", "metadata": {"a": NaN}}',
                                 b'{"externalId": "x", "metadata": {"a": 1e999}}', b"\x00"])
def test_malformed_json_is_a_400(client, raw):
    _assert_clear_error(client.post("/sessions", content=raw, headers=JSON), 400)


def test_an_empty_body_is_a_400(client):
    _assert_clear_error(client.post("/sessions", content=b"", headers=JSON), 400)


@pytest.mark.parametrize("query", ["limit=-1", "limit=0", "limit=1001", "limit=99999999999999999999999",
                                   "offset=-1", "offset=99999999999999999999999", "limit=abc", "offset=1.5"])
def test_out_of_range_paging_is_a_400(client, query):
    body = _assert_clear_error(client.get(f"/sessions?{query}"), 400)
    assert body["field"] in ("limit", "offset")


def test_the_largest_offset_is_an_empty_page(client, session_id):
    response = client.get(f"/sessions/{session_id}/episodes", params={"offset": MAX_ID})
    assert response.status_code == 200
    assert response.json()["items"] == []


@pytest.mark.parametrize("path", ["/sessions/{}", "/episodes/{}", "/entities/{}", "/summaries/{}",
                                  "/sessions/{}/episodes", "/entities/{}/relationships"])
@pytest.mark.parametrize("value", [2**63, 2**64 + 1, 10**30, -1, 0])
def test_ids_beyond_64_bit_or_below_one_are_a_400(client, path, value):
    _assert_clear_error(client.get(path.format(value)), 400)


@pytest.mark.parametrize("value", ["abc", "1.5", "1e3", "%20", "+1", "%D9%A1", "1_0", "%201", "0x1", "01"])
def test_a_non_integer_id_is_a_404(client, value):
    _assert_clear_error(client.get(f"/episodes/{value}"), 404)


@pytest.mark.parametrize("value", [2**63, -5, 0, 1.5, None, [1]])
def test_a_bad_id_in_a_body_is_a_400(client, value):
    body = {"sessionId": value, "userMessage": "a", "aiResponse": "b"}
    assert _assert_clear_error(client.post("/episodes", json=body), 400)["field"] == "sessionId"


def test_an_id_beyond_64_bit_in_a_relationship_is_a_400(client):
    body = {"fromId": 2**64, "toId": 1, "label": "knows"}
    _assert_clear_error(client.post("/relationships", json=body), 400)


@pytest.mark.parametrize("metadata", [[1, 2], "text", 5, True])
@pytest.mark.parametrize("path,base", [
    ("/sessions", {"externalId": "m"}),
    ("/episodes", {"userMessage": "a", "aiResponse": "b"}),
    ("/entities", {"name": "n", "type": "t"}),
])
def test_metadata_that_is_not_an_object_is_a_400(client, session_id, metadata, path, base):
    body = {**base, "metadata": metadata}
    if path == "/episodes":
        body["sessionId"] = session_id
    assert _assert_clear_error(client.post(path, json=body), 400)["field"] == "metadata"


def test_a_body_that_is_not_an_object_is_a_400(client):
    _assert_clear_error(client.post("/sessions", json=[{"externalId": "a"}]), 400)


def test_a_null_metadata_is_a_400(client):
    _assert_clear_error(client.post("/sessions", json={"externalId": "a", "metadata": None}), 400)


def test_a_wrong_content_type_is_a_4xx(client):
    response = client.post("/sessions", content=b"externalId=a", headers={"content-type": "application/x-www-form-urlencoded"})
    assert 400 <= response.status_code < 500


def test_a_negative_token_count_is_a_400(client, session_id):
    body = {"sessionId": session_id, "userMessage": "a", "aiResponse": "b", "tokenCount": -1}
    assert _assert_clear_error(client.post("/episodes", json=body), 400)["field"] == "tokenCount"


@pytest.mark.parametrize("value", [-1, 0, 10**20])
def test_a_bad_search_limit_is_a_400(client, value):
    _assert_clear_error(client.get("/episodes/search", params={"q": "x", "limit": value}), 400)
    _assert_clear_error(client.post("/search", json={"query": "x", "limit": value}), 400)


def test_an_unknown_method_is_a_405(client):
    _assert_clear_error(client.put("/sessions", json={}), 405)


def test_an_unknown_ranker_is_a_400(client):
    _assert_clear_error(client.post("/search", json={"query": "x", "ranker": "no-such-ranker"}), 400)


def test_a_lone_surrogate_escape_is_a_clear_answer(client, session_id):
    raw = json.dumps({"sessionId": session_id, "userMessage": "\ud800x", "aiResponse": "y"}).encode()
    response = client.post("/episodes", content=raw, headers=JSON)
    assert response.status_code in (201, 400), response.text
    if response.status_code == 201:
        assert client.get(f"/episodes/{response.json()['id']}").status_code == 200
