"""Owners (userId/agentId) on sessions, entities and relationships; scoped /search and
/context; metadata filters and minScore in /search."""

from __future__ import annotations

import pytest

from tests.api.test_errors import assert_error


def a_session(client, external_id: str, **owner) -> int:
    response = client.post("/sessions", json={"externalId": external_id, **owner})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def an_episode(client, session_id: int, text: str, **extra) -> int:
    response = client.post("/episodes", json={"sessionId": session_id, "userMessage": text, "aiResponse": "ok",
                                              **extra})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def search(client, **body) -> dict:
    response = client.post("/search", json={"query": "penguins", **body})
    assert response.status_code == 200, response.text
    return response.json()


def hit_ids(body: dict) -> list[int]:
    return sorted(h["id"] for h in body["hits"])


@pytest.fixture
def people(client) -> dict:
    alice1 = a_session(client, "a1", userId="alice", agentId="tutor")
    alice2 = a_session(client, "a2", userId="alice", agentId="coach")
    bob = a_session(client, "b1", userId="bob", agentId="tutor")
    nobody = a_session(client, "n1")
    return {
        "alice1": an_episode(client, alice1, "penguins swim", metadata={"topic": "birds", "n": 1}),
        "alice2": an_episode(client, alice2, "penguins waddle", metadata={"topic": "fish", "n": 2.0}),
        "bob": an_episode(client, bob, "penguins dive", metadata={"topic": "birds"}),
        "nobody": an_episode(client, nobody, "penguins sleep"),
        "sessions": {"alice1": alice1, "alice2": alice2, "bob": bob, "nobody": nobody},
    }


def test_a_users_search_spans_all_of_their_sessions_and_nobody_elses(client, people):
    assert hit_ids(search(client, userId="alice")) == sorted([people["alice1"], people["alice2"]])
    assert hit_ids(search(client, agentId="tutor")) == sorted([people["alice1"], people["bob"]])
    assert hit_ids(search(client, userId="alice", agentId="coach")) == [people["alice2"]]
    assert len(search(client)["hits"]) == 4  # no owner: everything, as before


def test_a_session_and_an_owner_must_agree(client, people):
    sessions = people["sessions"]
    assert hit_ids(search(client, userId="alice", sessionId=sessions["alice1"])) == [people["alice1"]]
    assert_error(client.post("/search", json={"query": "x", "userId": "bob", "sessionId": sessions["alice1"]}),
                 400, "userId")
    assert_error(client.post("/search", json={"query": "x", "agentId": "coach", "sessionId": sessions["alice1"]}),
                 400, "agentId")


def test_the_metadata_filter_applies_to_search(client, people):
    assert hit_ids(search(client, filter={"metadata": {"topic": "birds"}})) == sorted([people["alice1"], people["bob"]])
    assert hit_ids(search(client, filter={"metadata": {"n": 2}})) == [people["alice2"]]  # 2 equals 2.0
    assert hit_ids(search(client, filter={"metadata": {"n": {"exists": False}}})) == sorted(
        [people["bob"], people["nobody"]])
    assert hit_ids(search(client, userId="alice", filter={"metadata": {"topic": {"in": ["fish", "x"]}}})) == [
        people["alice2"]]


@pytest.mark.parametrize(("flt", "field"), [
    ({"metadata": {"n": {"between": 1}}}, "filter.metadata.n"),
    ({"metadata": {"n": [1]}}, "filter.metadata.n"),
    ({"metadata": "x"}, "filter.metadata"),
    ({"other": {}}, "filter.other"),
])
def test_a_bad_filter_is_a_400_naming_it(client, flt, field):
    body = assert_error(client.post("/search", json={"query": "x", "filter": flt}), 400)
    assert body["field"] is not None and body["field"].startswith(field.split(".")[0])


def test_min_score_drops_hits_below_that_relevance(client, people):
    everything = search(client, minScore=0)
    assert len(everything["hits"]) == 4 and everything["minScore"] == 0
    assert all(0.0 <= h["relevance"] <= 1.0 for h in everything["hits"])
    threshold = sorted(h["relevance"] for h in everything["hits"])[1]
    kept = search(client, minScore=threshold)["hits"]
    assert kept and all(h["relevance"] >= threshold for h in kept)


@pytest.mark.parametrize("value", [-0.1, 1.5, 1e9])
def test_a_min_score_off_the_relevance_scale_is_a_400_naming_it(client, value):
    body = assert_error(client.post("/search", json={"query": "x", "minScore": value}), 400)
    assert body["field"] == "minScore"


def test_context_for_a_user_spans_their_sessions(client, people):
    response = client.post("/context", json={"query": "penguins", "userId": "alice", "tokenBudget": 2000})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["sessionId"] is None and body["recentEpisodes"] == []
    assert sorted(e["episode"]["id"] for e in body["relevantEpisodes"]) == sorted(
        [people["alice1"], people["alice2"]])
    assert_error(client.post("/context", json={"query": "x", "tokenBudget": 10}), 400, "sessionId")


def test_entities_are_unique_per_user_and_no_user_keeps_the_global_rule(client):
    def upsert(**body):
        return client.post("/entities", json={"name": "Ada", "type": "person", **body})

    global_one, alices, bobs = upsert(), upsert(userId="alice"), upsert(userId="bob")
    assert [r.status_code for r in (global_one, alices, bobs)] == [201, 201, 201]
    assert "userId" not in global_one.json() and alices.json()["userId"] == "alice"
    again = upsert(userId="alice", notes="updated")
    assert again.status_code == 200 and again.json()["id"] == alices.json()["id"]
    assert upsert(notes="global again").json()["id"] == global_one.json()["id"]
    related = client.post("/relationships", json={"fromId": alices.json()["id"], "toId": bobs.json()["id"],
                                                  "label": "knows", "userId": "alice"})
    assert related.status_code == 201 and related.json()["userId"] == "alice"
    assert_error(upsert(userId=""), 400, "userId")


def test_forgetting_a_user_removes_everything_they_own_and_answers_the_counts(client, people):
    sessions = people["sessions"]
    client.post("/summaries", json={"sessionId": sessions["alice1"], "content": "penguins summary"})
    ada = client.post("/entities", json={"name": "Ada", "type": "person", "userId": "alice"}).json()
    shared = client.post("/entities", json={"name": "Zoo", "type": "place"}).json()
    bobs = client.post("/entities", json={"name": "Ada", "type": "person", "userId": "bob"}).json()
    client.post("/relationships", json={"fromId": ada["id"], "toId": shared["id"], "label": "visits"})
    client.post("/relationships", json={"fromId": shared["id"], "toId": bobs["id"], "label": "hosts",
                                        "userId": "alice"})
    response = client.delete("/users/alice")
    assert response.status_code == 200, response.text
    assert response.json() == {"sessions": 2, "episodes": 2, "summaries": 1, "entities": 1, "relationships": 2,
                               "history": 0}
    for gone in (f"/sessions/{sessions['alice1']}", f"/episodes/{people['alice1']}", f"/entities/{ada['id']}"):
        assert client.get(gone).status_code == 404
    assert hit_ids(search(client, userId="alice")) == []
    assert hit_ids(search(client)) == sorted([people["bob"], people["nobody"]])
    assert client.get(f"/entities/{shared['id']}").status_code == 200  # global: nobody's to forget
    assert client.get(f"/entities/{bobs['id']}").status_code == 200
    assert client.delete("/users/alice").json() == dict.fromkeys(response.json(), 0)  # again: zeros
    assert client.delete("/users/nobody-at-all").json()["sessions"] == 0


def test_forgetting_a_user_with_a_slash_in_the_id(client):
    a_session(client, "s", userId="org/alice")
    assert client.delete("/users/org%2Falice").json()["sessions"] == 1


def test_expired_records_are_never_returned_over_rest(client, session_id):
    past, future = "2000-01-01T00:00:00Z", "2999-01-01T00:00:00+02:00"
    gone = an_episode(client, session_id, "penguins gone", expiresAt=past)
    kept = client.post("/episodes", json={"sessionId": session_id, "userMessage": "penguins kept", "aiResponse": "ok",
                                          "expiresAt": future}).json()
    assert kept["expiresAt"] == "2998-12-31T22:00:00.000Z"  # stored in UTC, like createdAt
    assert client.get(f"/episodes/{gone}").status_code == 404
    assert [e["id"] for e in client.get(f"/sessions/{session_id}/episodes").json()["items"]] == [kept["id"]]
    assert hit_ids(search(client)) == [kept["id"]]
    summary = client.post("/summaries", json={"sessionId": session_id, "content": "s", "expiresAt": past}).json()
    assert client.get(f"/summaries/{summary['id']}").status_code == 404
    entity = client.post("/entities", json={"name": "Old", "type": "t", "expiresAt": past}).json()
    assert client.get(f"/entities/{entity['id']}").status_code == 404
    assert client.get(f"/episodes/{kept['id']}").json()["expiresAt"] == kept["expiresAt"]
    never = an_episode(client, session_id, "no expiry")
    assert "expiresAt" not in client.get(f"/episodes/{never}").json()  # the seed's body, unchanged


@pytest.mark.parametrize("value", ["tomorrow", 0, "2025-13-01T00:00:00Z"])
def test_a_bad_expires_at_is_a_400_naming_it(client, session_id, value):
    assert_error(client.post("/episodes", json={"sessionId": session_id, "userMessage": "x", "aiResponse": "y",
                                                "expiresAt": value}), 400, "expiresAt")
