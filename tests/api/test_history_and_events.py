"""GET /{kind}/:id/history, X-Actor, relationships valid in time (validFrom/validTo/asOf/supersedes)
and GET /events, through the app over a real SQLite file."""

from __future__ import annotations

import pytest


@pytest.fixture
def people(client) -> dict[str, int]:
    ids = {}
    for name, kind in (("Ada", "person"), ("Acme", "company"), ("Globex", "company")):
        ids[name] = client.post("/entities", json={"name": name, "type": kind}).json()["id"]
    return ids


def history(client, kind: str, record_id: int, **params) -> dict:
    response = client.get(f"/{kind}/{record_id}/history", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_an_episode_update_is_a_version_naming_the_actor(client, session_id):
    episode = client.post("/episodes", json={"sessionId": session_id, "userMessage": "hi", "aiResponse": "hello"}).json()
    patched = client.patch(f"/episodes/{episode['id']}", json={"aiResponse": "hey", "tokenCount": 4},
                           headers={"X-Actor": "agent:planner"})
    assert patched.status_code == 200, patched.text
    [version] = history(client, "episodes", episode["id"])["items"]
    assert version["op"] == "updated" and version["actor"] == "agent:planner"
    assert version["kind"] == "episodes" and version["recordId"] == episode["id"] and version["sessionId"] == session_id
    assert version["before"]["aiResponse"] == "hello" and version["after"]["aiResponse"] == "hey"
    assert version["changed"] == ["aiResponse", "tokenCount"]


def test_history_answers_after_the_record_is_deleted(client, session_id):
    summary = client.post("/summaries", json={"sessionId": session_id, "content": "gist"}).json()
    assert client.delete(f"/summaries/{summary['id']}").status_code == 204
    assert client.get(f"/summaries/{summary['id']}").status_code == 404
    [version] = history(client, "summaries", summary["id"])["items"]
    assert version["op"] == "deleted" and version["after"] is None and version["before"]["content"] == "gist"
    assert version["actor"] is None


def test_entity_history_pages_with_next_after(client):
    for notes in ("v0", "v1", "v2", "v3"):
        entity = client.post("/entities", json={"name": "Ada", "type": "person", "notes": notes}).json()
    first = history(client, "entities", entity["id"], limit=2)
    assert [v["after"]["notes"] for v in first["items"]] == ["v1", "v2"] and first["nextAfter"]
    rest = history(client, "entities", entity["id"], limit=2, after=first["nextAfter"])
    assert [v["after"]["notes"] for v in rest["items"]] == ["v3"] and rest["nextAfter"] is None


def test_a_record_that_never_changed_has_an_empty_history(client):
    assert history(client, "episodes", 12345) == {"items": [], "nextAfter": None}


@pytest.mark.parametrize("path", ["/episodes/0/history", "/relationships/1/history?limit=0",
                                  "/entities/1/history?after=-1"])
def test_bad_history_parameters_are_400(client, path):
    assert client.get(path).status_code == 400


def test_an_overlong_actor_is_a_400_naming_it(client):
    response = client.post("/entities", json={"name": "A", "type": "x"}, headers={"X-Actor": "x" * 201})
    assert response.status_code == 400
    assert response.json()["field"] == "X-Actor"


def test_validity_asof_and_supersedes(client, people):
    ada, acme, globex = people["Ada"], people["Acme"], people["Globex"]
    first = client.post("/relationships", json={"fromId": ada, "toId": acme, "label": "works_at",
                                                "validFrom": "2020-01-01T00:00:00+02:00"})
    assert first.status_code == 201, first.text
    assert first.json()["validFrom"] == "2019-12-31T22:00:00.000Z" and "validTo" not in first.json()
    second = client.post("/relationships", json={"fromId": ada, "toId": globex, "label": "works_at",
                                                 "validFrom": "2024-06-01T00:00:00Z", "supersedes": True})
    assert second.status_code == 201, second.text

    def at(moment: str | None) -> list[int]:
        params = {"asOf": moment} if moment else {}
        response = client.get(f"/entities/{ada}/relationships", params=params)
        assert response.status_code == 200, response.text
        return sorted(r["toId"] for r in response.json())

    assert at("2022-01-01T00:00:00Z") == [acme]
    assert at("2025-01-01T00:00:00Z") == [globex]
    assert at(None) == sorted([acme, globex])  # without asOf: every edge, open and closed
    [closing] = history(client, "relationships", first.json()["id"])["items"]
    assert closing["changed"] == ["validTo"] and closing["after"]["validTo"] == "2024-06-01T00:00:00.000Z"


@pytest.mark.parametrize(("body", "field"), [
    ({"validFrom": "yesterday"}, "validFrom"),
    ({"validTo": 0}, "validTo"),
    ({"validFrom": "2024-01-01T00:00:00Z", "validTo": "2023-01-01T00:00:00Z"}, "validTo"),
    ({"supersedes": "yes"}, "supersedes"),
])
def test_bad_validity_is_a_400_naming_the_field(client, people, body, field):
    response = client.post("/relationships", json={"fromId": people["Ada"], "toId": people["Acme"], "label": "x", **body})
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field


def test_a_bad_as_of_is_a_400_naming_it(client, people):
    response = client.get(f"/entities/{people['Ada']}/relationships", params={"asOf": "0"})
    assert response.status_code == 400 and response.json()["field"] == "asOf"


def test_context_includes_the_relationships_valid_as_of(client, session_id, people):
    ada, acme, globex = people["Ada"], people["Acme"], people["Globex"]
    client.post("/relationships", json={"fromId": ada, "toId": acme, "label": "works_at",
                                        "validFrom": "2020-01-01T00:00:00Z", "validTo": "2024-01-01T00:00:00Z"})
    client.post("/relationships", json={"fromId": ada, "toId": globex, "label": "works_at",
                                        "validFrom": "2024-01-01T00:00:00Z"})

    def edges(**extra) -> list[int]:
        response = client.post("/context", json={"query": "Where does Ada work?", "sessionId": session_id,
                                                 "tokenBudget": 2000, **extra})
        assert response.status_code == 200, response.text
        return [r["toId"] for r in response.json()["relationships"]]

    assert edges() == [globex]  # default: now
    assert edges(asOf="2021-05-01T00:00:00Z") == [acme]
    bad = client.post("/context", json={"query": "q", "sessionId": session_id, "tokenBudget": 10, "asOf": "soon"})
    assert bad.status_code == 400 and bad.json()["field"] == "asOf"


def test_events_list_changes_after_a_cursor(client, session_id):
    episode = client.post("/episodes", json={"sessionId": session_id, "userMessage": "a", "aiResponse": "b"}).json()
    client.delete(f"/episodes/{episode['id']}")
    feed = client.get("/events", params={"after": 0}).json()
    changes = [(e["kind"], e["recordId"], e["op"]) for e in feed["events"] if e["op"] != "embedded"]
    assert changes == [("sessions", session_id, "created"), ("episodes", episode["id"], "created"),
                       ("episodes", episode["id"], "deleted")]
    assert feed["nextAfter"] == feed["events"][-1]["seq"] and feed["truncated"] is False
    assert all(e["sessionId"] == session_id for e in feed["events"])
    later = client.get("/events", params={"after": feed["nextAfter"], "limit": 5}).json()
    assert all(e["seq"] > feed["nextAfter"] for e in later["events"])


def test_a_long_poll_with_events_waiting_answers_at_once(client, session_id):
    feed = client.get("/events", params={"after": 0, "wait": 30}).json()
    assert feed["events"][0]["kind"] == "sessions"


@pytest.mark.parametrize("params", [{"wait": 31}, {"wait": -1}, {"limit": 0}, {"limit": 1001}, {"after": -1},
                                    {"after": "x"}])
def test_bad_event_parameters_are_400(client, params):
    assert client.get("/events", params=params).status_code == 400
