"""GET /episodes, /entities, /relationships, /summaries and the cursor form of GET /sessions:
filters, order, keyset pages that hold while rows are written, and clear 400s."""

from __future__ import annotations

import base64
import json

import pytest

from tests.api.test_errors import assert_error

CURSOR_PAGE_KEYS = {"items", "limit", "nextCursor"}


def walk(client, path, **params):
    """Every page of a list through nextCursor; the ids in the order given."""
    ids, cursor = [], None
    while True:
        response = client.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == CURSOR_PAGE_KEYS
        ids += [item["id"] for item in body["items"]]
        cursor = body["nextCursor"]
        if cursor is None:
            return ids


def episode(client, session_id, text, created_at=None, **metadata):
    body = {"sessionId": session_id, "userMessage": text, "aiResponse": "ok", "metadata": metadata}
    if created_at:
        body["createdAt"] = created_at
    response = client.post("/episodes", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_episodes_list_across_sessions_oldest_first_or_newest_first(client, session_id):
    other = client.post("/sessions", json={"externalId": "conv-2"}).json()["id"]
    ids = [episode(client, session_id, "a", "2025-01-01T00:00:00Z"), episode(client, other, "b", "2025-01-02T00:00:00Z"),
           episode(client, session_id, "c", "2025-01-03T00:00:00Z")]
    assert walk(client, "/episodes", limit=2) == ids
    assert walk(client, "/episodes", limit=1, order="desc") == ids[::-1]
    assert walk(client, "/episodes", sessionId=session_id) == [ids[0], ids[2]]
    first = client.get("/episodes", params={"limit": 2}).json()
    assert first["limit"] == 2 and len(first["items"]) == 2 and first["items"][0]["userMessage"] == "a"


def test_episodes_filter_by_metadata_given_as_json(client, session_id):
    ids = [episode(client, session_id, f"t{n}", topic="pets" if n % 2 else "work", n=n) for n in range(6)]
    flt = json.dumps({"metadata": {"topic": "pets", "n": {"gte": 3}}})
    assert walk(client, "/episodes", filter=flt, limit=1) == [ids[3], ids[5]]


def test_a_walk_stays_correct_while_episodes_are_inserted(client, session_id):
    existing = [episode(client, session_id, f"e{n}", f"2025-01-01T00:00:{n * 2:02d}Z") for n in range(10)]
    for order in ("asc", "desc"):
        seen, cursor, n = [], None, 0
        while True:
            body = client.get("/episodes", params={"limit": 3, "order": order, **({"cursor": cursor} if cursor else {})}).json()
            seen += [e["id"] for e in body["items"]]
            n += 1  # between pages: one row among the ones already seen or ahead, one at the end
            episode(client, session_id, "new", f"2025-01-01T00:00:{n * 2 - 1:02d}Z")
            episode(client, session_id, "newest")
            cursor = body["nextCursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen))
        assert set(existing) <= set(seen)


def test_entities_list_by_type_and_relationships_by_entity_and_label(client):
    def upsert(name, kind):
        return client.post("/entities", json={"name": name, "type": kind}).json()["id"]

    ana, rui, lisbon = upsert("Ana", "person"), upsert("Rui", "person"), upsert("Lisbon", "place")
    assert walk(client, "/entities", type="person", limit=1) == [ana, rui]
    assert walk(client, "/entities", order="desc") == [lisbon, rui, ana]
    edges = [client.post("/relationships", json={"fromId": f, "toId": t, "label": label}).json()["id"]
             for f, t, label in [(ana, lisbon, "lives_in"), (rui, ana, "knows"), (rui, lisbon, "lives_in")]]
    assert walk(client, "/relationships", entityId=ana) == edges[:2]
    assert walk(client, "/relationships", label="lives_in", limit=1) == [edges[0], edges[2]]
    assert walk(client, "/relationships", entityId=lisbon, label="lives_in", order="desc") == [edges[2], edges[0]]


def test_summaries_list_by_session(client, session_id):
    made = [client.post("/summaries", json={"sessionId": session_id, "content": f"s{n}"}).json()["id"] for n in range(3)]
    assert walk(client, "/summaries", sessionId=session_id, limit=2) == made
    assert walk(client, "/summaries", sessionId=session_id + 1) == []


def test_sessions_keep_their_offset_page_and_answer_the_cursor_form_when_asked(client):
    ids = [client.post("/sessions", json={"externalId": f"c{n}", "metadata": {"n": n}}).json()["id"] for n in range(3)]
    seed = client.get("/sessions", params={"limit": 2, "offset": 1}).json()
    assert set(seed) == {"items", "total", "limit", "offset"} and seed["total"] == 3
    assert [s["id"] for s in seed["items"]] == ids[1:]
    assert set(client.get("/sessions").json()) == {"items", "total", "limit", "offset"}
    assert walk(client, "/sessions", order="desc", limit=2) == ids[::-1]
    assert walk(client, "/sessions", filter=json.dumps({"metadata": {"n": {"lt": 2}}})) == ids[:2]


@pytest.mark.parametrize("path", ["/episodes", "/entities", "/relationships", "/summaries", "/sessions"])
def test_a_cursor_from_another_order_or_another_list_or_garbage_is_a_400(client, session_id, path):
    for n in range(3):
        episode(client, session_id, f"x{n}")
        client.post("/entities", json={"name": f"e{n}", "type": "t"})
        client.post("/summaries", json={"sessionId": session_id, "content": f"s{n}"})
        client.post("/sessions", json={"externalId": f"more-{n}"})
    ids = [e["id"] for e in client.get("/entities").json()["items"]]
    for n in range(2):
        client.post("/relationships", json={"fromId": ids[n], "toId": ids[n + 1], "label": "l"})
    cursor = client.get(path, params={"limit": 1, "order": "asc"}).json()["nextCursor"]
    assert cursor
    assert_error(client.get(path, params={"cursor": cursor, "order": "desc"}), 400, "cursor")
    other = "/entities" if path != "/entities" else "/episodes"
    assert_error(client.get(other, params={"cursor": cursor}), 400, "cursor")
    for garbage in ("x", "!!!", cursor[:-3], "eyJ9"):
        assert_error(client.get(path, params={"cursor": garbage}), 400, "cursor")


@pytest.mark.parametrize("path", ["/episodes", "/entities", "/relationships", "/summaries", "/sessions"])
def test_a_cursor_whose_position_was_edited_is_a_400_not_a_silently_wrong_page(client, session_id, path):
    """A cursor of the right list and order whose timestamp is not a timestamp ("garbage" sorts
    after every date: an empty page; NUL before every date: the whole list again) was answered
    200 with a wrong page; the API promises an edited cursor is a 400 (docs/api/usage.md)."""
    kind = path.strip("/")
    for moment in ("garbage", "\u0000", "9999-99-99", ""):
        raw = json.dumps([1, kind, "asc", moment, 1], separators=(",", ":"))
        edited = base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")
        assert_error(client.get(path, params={"cursor": edited, "order": "asc"}), 400, "cursor")


@pytest.mark.parametrize("path", ["/episodes", "/entities", "/relationships", "/summaries", "/sessions"])
@pytest.mark.parametrize("params, field", [
    ({"filter": "{not json"}, "filter"),
    ({"filter": '{"metadata": {"k": {"near": 1}}}'}, "filter.metadata.k"),
    ({"filter": '{"tags": 1}'}, "filter"),
    ({"filter": "[1]"}, "filter"),
    # A lone surrogate escape decodes to a str no store can bind: a 400, not a 500.
    ({"filter": '{"metadata": {"\\ud800": 1}}'}, "filter"),
    ({"filter": '{"metadata": {"k": "\\udfff"}}'}, "filter"),
    ({"filter": '{"metadata": {"k": {"in": ["a", "\\ud800"]}}}'}, "filter"),
    ({"filter": '{"metadata": {"k": {"gte": "\\ud800"}}}'}, "filter"),
    ({"order": "sideways"}, "order"),
    ({"limit": 0}, "limit"),
    ({"limit": 100000}, "limit"),
])
def test_bad_list_parameters_are_400s_naming_them(client, path, params, field):
    assert_error(client.get(path, params=params), 400, field)


def test_offset_with_the_cursor_form_of_sessions_is_a_400(client):
    assert_error(client.get("/sessions", params={"order": "desc", "offset": 2}), 400, "offset")


@pytest.mark.parametrize("path, param", [("/episodes", "sessionId"), ("/summaries", "sessionId"),
                                         ("/relationships", "entityId")])
def test_bad_ids_in_list_filters_are_400s(client, path, param):
    for bad in ("0", "-1", "x", str(2**63)):
        assert_error(client.get(path, params={param: bad}), 400, param)


def test_lists_filter_by_owner(client):
    alice = client.post("/sessions", json={"externalId": "a", "userId": "alice", "agentId": "helper"}).json()["id"]
    bob = client.post("/sessions", json={"externalId": "b", "userId": "bob"}).json()["id"]
    mine = [episode(client, alice, f"a{n}") for n in range(3)]
    episode(client, bob, "b")
    assert walk(client, "/episodes", userId="alice", limit=2) == mine
    assert walk(client, "/episodes", agentId="helper", order="desc") == mine[::-1]
    assert walk(client, "/episodes", userId="bob", agentId="helper") == []
    summary = client.post("/summaries", json={"sessionId": bob, "content": "b"}).json()["id"]
    assert walk(client, "/summaries", userId="bob") == [summary]
    assert walk(client, "/sessions", userId="alice", order="asc") == [alice]
    ana = client.post("/entities", json={"name": "Ana", "type": "person", "userId": "alice"}).json()["id"]
    glob = client.post("/entities", json={"name": "Ana", "type": "person"}).json()["id"]
    assert walk(client, "/entities", userId="alice") == [ana]
    assert walk(client, "/entities") == [ana, glob]
    edge = client.post("/relationships", json={"fromId": ana, "toId": glob, "label": "is", "userId": "alice"}).json()
    client.post("/relationships", json={"fromId": glob, "toId": ana, "label": "is"})
    assert walk(client, "/relationships", userId="alice") == [edge["id"]]
    for path in ("/episodes", "/entities", "/relationships", "/summaries"):
        assert_error(client.get(path, params={"userId": ""}), 400, "userId")
