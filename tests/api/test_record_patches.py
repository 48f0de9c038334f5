"""PATCH /entities/:id and PATCH /summaries/:id: partial changes, 409 on a rename collision,
re-indexed at once and re-embedded through the outbox, unknown fields 400, unknown ids 404."""

from __future__ import annotations

import pytest

from tests.api.test_errors import assert_error


def entity(client, name, kind="person", **extra):
    response = client.post("/entities", json={"name": name, "type": kind, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def test_patching_an_entity_changes_only_the_given_fields(client):
    e = entity(client, "Ana", notes="cellist", metadata={"k": 1})
    response = client.patch(f"/entities/{e['id']}", json={"metadata": {"k": 2}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["name"], body["type"], body["notes"], body["metadata"]) == ("Ana", "person", "cellist", {"k": 2})
    assert body["createdAt"] == e["createdAt"] and body["updatedAt"] >= e["updatedAt"]
    renamed = client.patch(f"/entities/{e['id']}", json={"name": "Ana Sousa", "notes": ""}).json()
    assert (renamed["name"], renamed["notes"]) == ("Ana Sousa", "")
    assert client.get(f"/entities/{e['id']}").json() == renamed


def test_a_patched_entity_is_found_by_its_new_words_and_not_its_old_ones(client):
    e = entity(client, "Ana", notes="cellist")
    client.patch(f"/entities/{e['id']}", json={"notes": "violinist"})
    found = client.post("/search", json={"query": "violinist", "sources": ["entities"]}).json()["hits"]
    assert [h["id"] for h in found if h["keyword"]] == [e["id"]]
    old = client.post("/search", json={"query": "cellist", "sources": ["entities"]}).json()["hits"]
    assert [h for h in old if h["keyword"]] == []


def test_renaming_an_entity_onto_another_is_a_409(client):
    entity(client, "Ana")
    rui = entity(client, "Rui")
    assert_error(client.patch(f"/entities/{rui['id']}", json={"name": "Ana"}), 409, "name")
    assert client.get(f"/entities/{rui['id']}").json()["name"] == "Rui"


@pytest.mark.parametrize("path, body", [("/entities/999", {"notes": "x"}), ("/summaries/999", {"content": "x"})])
def test_patching_an_unknown_record_is_a_404(client, path, body):
    assert_error(client.patch(path, json=body), 404)


@pytest.mark.parametrize("body, field", [
    ({"nmae": "x"}, "nmae"), ({"name": ""}, "name"), ({"type": "x" * 1000}, "type"), ({"notes": 5}, "notes"),
    ({"metadata": [1]}, "metadata"), ({"userId": "u"}, "userId"),
])
def test_a_bad_entity_patch_is_a_400_naming_the_field(client, body, field):
    e = entity(client, "Ana")
    assert_error(client.patch(f"/entities/{e['id']}", json=body), 400, field)


def test_patching_a_summary_changes_content_counts_and_metadata(client, session_id):
    made = client.post("/summaries", json={"sessionId": session_id, "content": "cats and dogs", "episodeCount": 2,
                                           "firstEpisodeId": 1, "lastEpisodeId": 2}).json()
    response = client.patch(f"/summaries/{made['id']}", json={"content": "parrots only", "episodeCount": 5,
                                                               "lastEpisodeId": 7, "metadata": {"v": 2}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["content"], body["episodeCount"], body["firstEpisodeId"], body["lastEpisodeId"], body["metadata"]) \
        == ("parrots only", 5, 1, 7, {"v": 2})
    assert client.get(f"/summaries/{made['id']}").json() == body
    found = client.post("/search", json={"query": "parrots", "sources": ["summaries"]}).json()["hits"]
    assert [h["id"] for h in found if h["keyword"]] == [made["id"]]


@pytest.mark.parametrize("body, field", [
    ({"contents": "x"}, "contents"), ({"content": "  "}, "content"), ({"episodeCount": -1}, "episodeCount"),
    ({"tokenCount": [3]}, "tokenCount"), ({"firstEpisodeId": 0}, "firstEpisodeId"), ({"sessionId": 2}, "sessionId"),
])
def test_a_bad_summary_patch_is_a_400_naming_the_field(client, session_id, body, field):
    made = client.post("/summaries", json={"sessionId": session_id, "content": "c"}).json()
    assert_error(client.patch(f"/summaries/{made['id']}", json=body), 400, field)


def test_patching_an_expired_record_is_a_404_like_reading_it(client, session_id):
    """An expired record is never returned (docs/api/usage.md, expiry): GET answered 404 but PATCH changed it
    and answered it, 200, with its content."""
    past = "2000-01-01T00:00:00Z"
    made = {
        "episodes": client.post("/episodes", json={"sessionId": session_id, "userMessage": "gone", "aiResponse": "ok",
                                                   "expiresAt": past}),
        "entities": client.post("/entities", json={"name": "Gone", "type": "t", "expiresAt": past}),
        "summaries": client.post("/summaries", json={"sessionId": session_id, "content": "gone", "expiresAt": past}),
    }
    for path, response in made.items():
        assert response.status_code == 201, response.text
        record_id = response.json()["id"]
        assert client.get(f"/{path}/{record_id}").status_code == 404
        assert_error(client.patch(f"/{path}/{record_id}", json={"metadata": {"k": 1}}), 404)
        assert client.get(f"/{path}/{record_id}/history").json()["items"] == []
