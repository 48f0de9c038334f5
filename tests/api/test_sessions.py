"""/sessions: create, read, list, patch, delete (with its cascade), and a session's episodes."""

from __future__ import annotations

import pytest

from tests.api.test_errors import TOO_BIG_ID, assert_error

SESSION_KEYS = {"id", "externalId", "metadata", "createdAt", "updatedAt"}


def add_episode(client, session_id: int, text: str = "hello", **extra) -> dict:
    response = client.post("/episodes", json={"sessionId": session_id, "userMessage": text, "aiResponse": "ok",
                                              **extra})
    assert response.status_code == 201, response.text
    return response.json()


def test_creating_a_session_answers_201_with_the_camel_case_record(client):
    response = client.post("/sessions", json={"externalId": "conv-42", "metadata": {"user": "u1", "n": [1, 2]}})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == SESSION_KEYS
    assert body["externalId"] == "conv-42"
    assert body["metadata"] == {"user": "u1", "n": [1, 2]}
    assert isinstance(body["id"], int) and body["id"] >= 1
    assert body["createdAt"].endswith("Z") and len(body["createdAt"]) == len("2024-01-01T00:00:00.000Z")


def test_metadata_defaults_to_an_empty_object(client):
    assert client.post("/sessions", json={"externalId": "bare"}).json()["metadata"] == {}


def test_a_duplicate_external_id_is_a_409_naming_the_field(client, session_id):
    body = assert_error(client.post("/sessions", json={"externalId": "conv-1"}), 409, "externalId")
    assert body["code"] == "conflict"


def test_a_missing_external_id_is_a_400_naming_it(client):
    assert_error(client.post("/sessions", json={"metadata": {}}), 400, "externalId")


@pytest.mark.parametrize("external_id", ["", "   ", "a\u0000b"])
def test_an_empty_or_nul_external_id_is_a_400(client, external_id):
    assert_error(client.post("/sessions", json={"externalId": external_id}), 400, "externalId")


@pytest.mark.parametrize("external_id", [5, None, ["a"], {"a": 1}, True])
def test_an_external_id_of_the_wrong_type_is_a_400_naming_it(client, external_id):
    assert_error(client.post("/sessions", json={"externalId": external_id}), 400, "externalId")


@pytest.mark.parametrize("metadata", [[1, 2], "text", 3, True])
def test_metadata_that_is_not_an_object_is_a_400(client, metadata):
    assert_error(client.post("/sessions", json={"externalId": "m", "metadata": metadata}), 400, "metadata")


def test_a_session_is_read_back_by_id_and_by_external_id(client, session_id):
    by_id = client.get(f"/sessions/{session_id}")
    assert by_id.status_code == 200
    by_external = client.get("/sessions/by-external/conv-1")
    assert by_external.status_code == 200
    assert by_id.json() == by_external.json()
    assert by_id.json()["externalId"] == "conv-1"


def test_an_external_id_with_spaces_and_unicode_is_found(client):
    created = client.post("/sessions", json={"externalId": "chat über alles"}).json()
    assert client.get("/sessions/by-external/chat über alles").json()["id"] == created["id"]


def test_an_unknown_session_is_a_404_by_id_and_by_external_id(client):
    assert_error(client.get("/sessions/999"), 404)
    assert_error(client.get("/sessions/by-external/nobody"), 404)


def test_by_external_is_not_captured_by_the_id_route(client, session_id):
    # "by-external" is not an integer, and the static segment must win over {session_id}.
    assert client.get("/sessions/by-external/conv-1").json()["id"] == session_id


def test_deleting_a_session_answers_204_and_then_it_is_gone(client, session_id):
    response = client.delete(f"/sessions/{session_id}")
    assert response.status_code == 204
    assert response.content == b""
    assert_error(client.get(f"/sessions/{session_id}"), 404)
    assert_error(client.delete(f"/sessions/{session_id}"), 404)


def test_deleting_a_session_deletes_its_episodes_and_summaries(client, session_id):
    episode = add_episode(client, session_id, "a cascading remark")
    summary = client.post("/summaries", json={"sessionId": session_id, "content": "all about cascades"}).json()
    other = client.post("/sessions", json={"externalId": "other"}).json()["id"]
    survivor = add_episode(client, other, "a cascading survivor")
    assert client.delete(f"/sessions/{session_id}").status_code == 204
    assert_error(client.get(f"/episodes/{episode['id']}"), 404)
    assert_error(client.get(f"/summaries/{summary['id']}"), 404)
    found = client.get("/episodes/search", params={"q": "cascading"}).json()["results"]
    assert [hit["episode"]["id"] for hit in found] == [survivor["id"]]


def test_the_external_id_of_a_deleted_session_can_be_reused(client, session_id):
    client.delete(f"/sessions/{session_id}")
    assert client.post("/sessions", json={"externalId": "conv-1"}).status_code == 201


def test_patching_a_session_replaces_its_metadata(client):
    created = client.post("/sessions", json={"externalId": "p", "metadata": {"old": 1}}).json()
    response = client.patch(f"/sessions/{created['id']}", json={"metadata": {"new": 2}})
    assert response.status_code == 200
    body = response.json()
    assert body["metadata"] == {"new": 2}
    assert body["externalId"] == "p"
    assert body["createdAt"] == created["createdAt"]
    assert body["updatedAt"] >= created["updatedAt"]
    assert client.get(f"/sessions/{created['id']}").json()["metadata"] == {"new": 2}


def test_patching_an_unknown_session_is_a_404(client):
    assert_error(client.patch("/sessions/999", json={"metadata": {}}), 404)


def test_patching_with_metadata_that_is_not_an_object_is_a_400(client, session_id):
    assert_error(client.patch(f"/sessions/{session_id}", json={"metadata": [1]}), 400, "metadata")


def test_patching_without_metadata_is_a_400_naming_it(client, session_id):
    assert_error(client.patch(f"/sessions/{session_id}", json={}), 400, "metadata")


def test_listing_sessions_pages_oldest_first_with_the_total(client):
    ids = [client.post("/sessions", json={"externalId": f"s{i}"}).json()["id"] for i in range(5)]
    first = client.get("/sessions", params={"limit": 2}).json()
    assert (first["total"], first["limit"], first["offset"]) == (5, 2, 0)
    assert [s["id"] for s in first["items"]] == ids[:2]
    rest = client.get("/sessions", params={"limit": 2, "offset": 2}).json()
    assert [s["id"] for s in rest["items"]] == ids[2:4]
    last = client.get("/sessions", params={"limit": 2, "offset": 4}).json()
    assert [s["id"] for s in last["items"]] == ids[4:]
    beyond = client.get("/sessions", params={"offset": 50}).json()
    assert beyond["items"] == [] and beyond["total"] == 5


def test_listing_sessions_of_an_empty_store_is_an_empty_page(client):
    assert client.get("/sessions").json() == {"items": [], "total": 0, "limit": 20, "offset": 0}


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": -1}, {"limit": 1001}, {"offset": -1}, {"limit": "x"},
                                    {"limit": TOO_BIG_ID}])
def test_listing_sessions_with_a_bad_page_is_a_400(client, params):
    assert_error(client.get("/sessions", params=params), 400, next(iter(params)))


def test_a_sessions_episodes_come_oldest_first_with_the_total(client, session_id):
    made = [add_episode(client, session_id, f"turn {i}") for i in range(5)]
    other = client.post("/sessions", json={"externalId": "other"}).json()["id"]
    add_episode(client, other, "elsewhere")
    page = client.get(f"/sessions/{session_id}/episodes").json()
    assert page["total"] == 5
    assert [e["id"] for e in page["items"]] == [e["id"] for e in made]
    assert [e["userMessage"] for e in page["items"]] == [f"turn {i}" for i in range(5)]


def test_a_sessions_episodes_are_ordered_by_created_at_not_by_insertion(client, session_id):
    late = add_episode(client, session_id, "late", createdAt="2024-05-02T10:00:00Z")
    early = add_episode(client, session_id, "early", createdAt="2024-05-01T10:00:00Z")
    items = client.get(f"/sessions/{session_id}/episodes").json()["items"]
    assert [e["id"] for e in items] == [early["id"], late["id"]]
    assert items[0]["createdAt"] == "2024-05-01T10:00:00.000Z"


def test_a_sessions_episodes_are_paginated_with_limit_and_offset(client, session_id):
    made = [add_episode(client, session_id, f"turn {i}")["id"] for i in range(7)]
    page = client.get(f"/sessions/{session_id}/episodes", params={"limit": 3, "offset": 2}).json()
    assert (page["total"], page["limit"], page["offset"]) == (7, 3, 2)
    assert [e["id"] for e in page["items"]] == made[2:5]
    tail = client.get(f"/sessions/{session_id}/episodes", params={"limit": 3, "offset": 6}).json()
    assert [e["id"] for e in tail["items"]] == made[6:]


def test_an_empty_sessions_episodes_are_an_empty_page(client, session_id):
    assert client.get(f"/sessions/{session_id}/episodes").json() == {"items": [], "total": 0, "limit": 20,
                                                                     "offset": 0}


def test_the_episodes_of_an_unknown_session_are_a_404(client):
    assert_error(client.get("/sessions/999/episodes"), 404)


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": -1}, "limit"), ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"limit": 10**12}, "limit"),
    ({"offset": -1}, "offset"), ({"limit": "ten"}, "limit"), ({"offset": TOO_BIG_ID}, "offset"),
])
def test_a_negative_or_oversized_page_of_episodes_is_a_400(client, session_id, params, field):
    assert_error(client.get(f"/sessions/{session_id}/episodes", params=params), 400, field)


def test_the_largest_page_size_is_allowed(client, session_id):
    assert client.get(f"/sessions/{session_id}/episodes", params={"limit": 1000}).status_code == 200


def test_a_session_takes_an_owner_keeps_it_through_patch_and_lists_filter_by_it(client):
    made = client.post("/sessions", json={"externalId": "a", "userId": "alice", "agentId": "helper"})
    assert made.status_code == 201, made.text
    assert made.json()["userId"] == "alice" and made.json()["agentId"] == "helper"
    client.post("/sessions", json={"externalId": "b", "userId": "bob"})
    client.post("/sessions", json={"externalId": "c"})
    patched = client.patch(f"/sessions/{made.json()['id']}", json={"metadata": {"x": 1}}).json()
    assert (patched["userId"], patched["agentId"]) == ("alice", "helper")
    assert [s["externalId"] for s in client.get("/sessions", params={"userId": "alice"}).json()["items"]] == ["a"]
    assert [s["externalId"] for s in client.get("/sessions", params={"agentId": "helper"}).json()["items"]] == ["a"]
    assert client.get("/sessions", params={"userId": "bob", "agentId": "helper"}).json()["total"] == 0
    assert client.get("/sessions").json()["total"] == 3
    assert set(client.get("/sessions/by-external/c").json()) == SESSION_KEYS  # no owner: the seed's body


@pytest.mark.parametrize("body", [{"userId": ""}, {"agentId": ""}, {"userId": 5}, {"userId": "x" * 1001}])
def test_a_bad_owner_is_a_400_naming_it(client, body):
    assert_error(client.post("/sessions", json={"externalId": "a", **body}), 400, next(iter(body)))


def test_an_empty_owner_query_is_a_400(client):
    assert client.get("/sessions", params={"userId": ""}).status_code == 400


@pytest.mark.parametrize("external_id", ["user/42", "a/b/c", "50%/x", "a b/ü?#"])
def test_an_external_id_with_slashes_inside_is_reachable_in_the_path(client, external_id):
    from urllib.parse import quote

    made = client.post("/sessions", json={"externalId": external_id}).json()
    found = client.get(f"/sessions/by-external/{quote(external_id, safe='')}")
    assert found.status_code == 200, found.text
    assert found.json()["id"] == made["id"]


@pytest.mark.parametrize("external_id", ["user/42", "/lead", "trail/", "//", "a?b&c=d#e", "plain"])
def test_any_external_id_is_reachable_as_a_query_parameter(client, external_id):
    made = client.post("/sessions", json={"externalId": external_id}).json()
    found = client.get("/sessions/by-external", params={"externalId": external_id})
    assert found.status_code == 200, found.text
    assert found.json()["id"] == made["id"]


def test_the_query_form_of_by_external_needs_the_id(client):
    assert_error(client.get("/sessions/by-external"), 400, "externalId")
    assert_error(client.get("/sessions/by-external", params={"externalId": "nobody"}), 404)
