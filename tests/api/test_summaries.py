"""/summaries and /sessions/:id/summaries."""

from __future__ import annotations

import pytest

from tests.api.test_errors import assert_error

SUMMARY_KEYS = {"id", "sessionId", "content", "firstEpisodeId", "lastEpisodeId", "episodeCount", "tokenCount",
                "metadata", "createdAt"}


def add(client, session_id: int, content: str, **extra) -> dict:
    response = client.post("/summaries", json={"sessionId": session_id, "content": content, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def test_creating_a_summary_answers_201_with_the_record(client, session_id):
    episodes = [client.post("/episodes", json={"sessionId": session_id, "userMessage": f"m{i}",
                                               "aiResponse": "r"}).json()["id"] for i in range(3)]
    response = client.post("/summaries", json={
        "sessionId": session_id, "content": "They discussed three things.", "firstEpisodeId": episodes[0],
        "lastEpisodeId": episodes[-1], "episodeCount": 3, "tokenCount": 12, "metadata": {"model": "x"},
    })
    assert response.status_code == 201
    body = response.json()
    assert set(body) == SUMMARY_KEYS
    assert (body["sessionId"], body["content"], body["firstEpisodeId"], body["lastEpisodeId"]) == (
        session_id, "They discussed three things.", episodes[0], episodes[-1])
    assert (body["episodeCount"], body["tokenCount"], body["metadata"]) == (3, 12, {"model": "x"})
    assert client.get(f"/summaries/{body['id']}").json() == body


def test_optional_summary_fields_have_defaults(client, session_id):
    body = add(client, session_id, "short")
    assert (body["firstEpisodeId"], body["lastEpisodeId"], body["episodeCount"], body["tokenCount"],
            body["metadata"]) == (None, None, 0, None, {})


def test_a_summary_for_an_unknown_session_is_a_404_naming_session_id(client):
    assert_error(client.post("/summaries", json={"sessionId": 999, "content": "x"}), 404, "sessionId")


@pytest.mark.parametrize("missing", ["sessionId", "content"])
def test_a_missing_summary_field_is_a_400_naming_it(client, session_id, missing):
    payload = {"sessionId": session_id, "content": "text"}
    del payload[missing]
    assert_error(client.post("/summaries", json=payload), 400, missing)


@pytest.mark.parametrize(("field", "value"), [
    ("content", ""), ("content", "  "), ("content", 5), ("content", "nul\u0000"), ("episodeCount", -1),
    ("tokenCount", "ten"), ("firstEpisodeId", 0), ("metadata", [1]), ("sessionId", "s"),
])
def test_a_bad_summary_field_is_a_400_naming_it(client, session_id, field, value):
    payload = {"sessionId": session_id, "content": "text", field: value}
    assert_error(client.post("/summaries", json=payload), 400, field)


def test_an_unknown_summary_is_a_404(client):
    assert_error(client.get("/summaries/999"), 404)


def test_a_sessions_summaries_come_oldest_first(client, session_id):
    made = [add(client, session_id, f"part {i}")["id"] for i in range(3)]
    other = client.post("/sessions", json={"externalId": "other"}).json()["id"]
    add(client, other, "elsewhere")
    response = client.get(f"/sessions/{session_id}/summaries")
    assert response.status_code == 200
    assert [s["id"] for s in response.json()] == made
    assert {s["sessionId"] for s in response.json()} == {session_id}


def test_a_session_without_summaries_has_an_empty_list(client, session_id):
    assert client.get(f"/sessions/{session_id}/summaries").json() == []


def test_the_summaries_of_an_unknown_session_are_a_404(client):
    assert_error(client.get("/sessions/999/summaries"), 404)


def test_deleting_a_summary_answers_204_then_404(client, session_id):
    summary = add(client, session_id, "to be removed")
    keep = add(client, session_id, "to be kept")
    response = client.delete(f"/summaries/{summary['id']}")
    assert response.status_code == 204 and response.content == b""
    assert_error(client.get(f"/summaries/{summary['id']}"), 404)
    assert_error(client.delete(f"/summaries/{summary['id']}"), 404)
    assert [s["id"] for s in client.get(f"/sessions/{session_id}/summaries").json()] == [keep["id"]]
