"""Scoped API keys through the real app: the admin routes, a key bound to a user on every route
family (sessions, episodes, entities, relationships, summaries, search, context, history, the
feed, forgetting), scopes, revocation, expiry, the per-key rate limit, the doors (metrics, /mcp's
Host check, path spellings) and the actor history records."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient

from app.main import create_app
from tests.api.test_errors import assert_error

ADMIN_KEY = "bootstrap-admin-key-for-tests"


def owners_in(value: Any) -> set[str | None]:
    """Every ``userId`` anywhere in a JSON answer."""
    found: set[str | None] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "userId" in item:
                found.add(item["userId"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def app_client(make_settings):
    with TestClient(create_app(make_settings(memory_api_key=ADMIN_KEY))) as client:
        client.headers.update(bearer(ADMIN_KEY))
        yield client


def issue(client: TestClient, **body: Any) -> str:
    answer = client.post("/admin/keys", json={"name": "test", **body})
    assert answer.status_code == 201, answer.text
    return answer.json()["key"]


@pytest.fixture
def world(app_client):
    """Two users' sessions, episodes, entities, a relationship and a summary, and a global entity."""
    made: dict[str, Any] = {}
    for user in ("u1", "u2"):
        session = app_client.post("/sessions", json={"externalId": f"{user}-chat", "userId": user}).json()
        episode = app_client.post("/episodes", json={"sessionId": session["id"], "userMessage": f"marathon {user}",
                                                     "aiResponse": "training plan"}).json()
        person = app_client.post("/entities", json={"name": f"Ana {user}", "type": "person", "userId": user}).json()
        city = app_client.post("/entities", json={"name": f"Lisbon {user}", "type": "city", "userId": user}).json()
        edge = app_client.post("/relationships", json={"fromId": person["id"], "toId": city["id"], "label": "lives_in",
                                                       "userId": user}).json()
        summary = app_client.post("/summaries", json={"sessionId": session["id"], "content": f"marathon {user}"}).json()
        made[user] = {"session": session, "episode": episode, "person": person, "city": city, "edge": edge,
                      "summary": summary}
    made["global"] = app_client.post("/entities", json={"name": "Marathon", "type": "event"}).json()
    return made


def test_no_key_is_a_401_and_the_admin_routes_need_the_admin_scope(app_client, world):
    assert app_client.get("/sessions", headers={"Authorization": ""}).status_code == 401
    key = issue(app_client, userId="u1")
    assert app_client.get("/admin/keys", headers=bearer(key)).status_code == 403
    listed = app_client.get("/admin/keys").json()
    assert [k["name"] for k in listed] == ["test"] and "key" not in listed[0] and "keyHash" not in listed[0]


def test_a_bound_key_reads_only_its_users_records_and_the_global_ones(app_client, world):
    key = issue(app_client, userId="u1")
    other = world["u2"]
    for path in (f"/sessions/{other['session']['id']}", f"/episodes/{other['episode']['id']}",
                 f"/entities/{other['person']['id']}", f"/summaries/{other['summary']['id']}",
                 f"/sessions/{other['session']['id']}/episodes", f"/sessions/{other['session']['id']}/summaries",
                 f"/entities/{other['person']['id']}/relationships", "/sessions/by-external/u2-chat"):
        assert app_client.get(path, headers=bearer(key)).status_code == 404, path
    assert app_client.get(f"/entities/{world['global']['id']}", headers=bearer(key)).status_code == 200
    for path in ("/sessions", "/episodes", "/entities", "/relationships", "/summaries", "/entities/by-type/person",
                 "/episodes/search?q=marathon", "/events", f"/entities/{world['u1']['person']['id']}/relationships"):
        answer = app_client.get(path, headers=bearer(key))
        assert answer.status_code == 200, (path, answer.text)
        # Every text of u2's records names u2, and so does every event of theirs (its userId).
        assert owners_in(answer.json()) <= {"u1", None} and "u2" not in answer.text, path
    assert app_client.get("/sessions?userId=u2", headers=bearer(key)).json()["field"] == "userId"


def test_search_and_context_of_a_bound_key_hold_only_its_users_memories(app_client, world):
    key = issue(app_client, userId="u1")
    found = app_client.post("/search", headers=bearer(key), json={
        "query": "marathon", "sources": ["episodes", "entities", "summaries"]})
    assert found.status_code == 200 and found.json()["hits"]
    assert owners_in(found.json()) <= {"u1", None} and "u2" not in found.text
    package = app_client.post("/context", headers=bearer(key), json={"query": "marathon", "tokenBudget": 1000,
                                                                      "userId": "u1"})
    assert package.status_code == 200 and owners_in(package.json()) <= {"u1", None} and "u2" not in package.text
    assert "marathon u1" in package.text
    other_session = world["u2"]["session"]["id"]
    assert app_client.post("/search", headers=bearer(key), json={"query": "marathon", "sessionId": other_session}
                           ).status_code == 404
    refused = app_client.post("/search", headers=bearer(key), json={"query": "marathon", "userId": "u2"})
    assert refused.status_code == 403 and refused.json()["field"] == "userId"


def test_another_users_relationships_never_weigh_in_a_bound_keys_context(app_client):
    # u2's many edges to a shared entity were charged to u1's budget and listed in `omitted`.
    lisbon = app_client.post("/entities", json={"name": "Lisbon", "type": "city"}).json()
    for n in range(30):
        friend = app_client.post("/entities", json={"name": f"Friend{n}", "type": "person", "userId": "u2"}).json()
        app_client.post("/relationships", json={"fromId": friend["id"], "toId": lisbon["id"],
                                                "label": "secretly_visits", "userId": "u2"})
    ana = app_client.post("/entities", json={"name": "Ana", "type": "person", "userId": "u1"}).json()
    mine = app_client.post("/relationships", json={"fromId": ana["id"], "toId": lisbon["id"], "label": "lives_in",
                                                   "userId": "u1"}).json()
    session = app_client.post("/sessions", json={"externalId": "u1-ctx", "userId": "u1"}).json()
    app_client.post("/episodes", json={"sessionId": session["id"], "userMessage": "Ana lives in Lisbon",
                                       "aiResponse": "noted"})
    theirs = {r["id"] for r in app_client.get(f"/entities/{lisbon['id']}/relationships?direction=in").json()} - {
        mine["id"]}
    for key in (issue(app_client, userId="u1"), issue(app_client, userId="u1", globalRead=False)):
        for budget in (60, 2000):
            package = app_client.post("/context", headers=bearer(key), json={
                "query": "Ana Lisbon", "tokenBudget": budget, "sessionId": session["id"]}).json()
            omitted = {o["id"] for o in package["omitted"] if o["kind"] == "relationship"}
            assert not omitted & theirs and "u2" not in str(package), (budget, package)
            if budget == 2000:
                assert {r["id"] for r in package["relationships"]} <= {mine["id"]}


def test_a_bound_key_writes_only_as_its_user(app_client, world):
    key = issue(app_client, userId="u1")
    other = app_client.post("/sessions", headers=bearer(key), json={"externalId": "x", "userId": "u2"})
    assert other.status_code == 403 and other.json()["field"] == "userId"
    unowned = app_client.post("/entities", headers=bearer(key), json={"name": "Global", "type": "thing"})
    assert unowned.status_code == 403 and unowned.json()["field"] == "userId"
    assert app_client.post("/sessions", headers=bearer(key), json={"externalId": "mine", "userId": "u1"}
                           ).status_code == 201
    assert app_client.post("/episodes", headers=bearer(key), json={
        "sessionId": world["u2"]["session"]["id"], "userMessage": "hi", "aiResponse": "ho"}).status_code == 404
    assert app_client.delete(f"/episodes/{world['u2']['episode']['id']}", headers=bearer(key)).status_code == 404
    assert app_client.delete(f"/entities/{world['global']['id']}", headers=bearer(key)).status_code == 403
    assert app_client.post("/relationships", headers=bearer(key), json={
        "fromId": world["u1"]["person"]["id"], "toId": world["u2"]["city"]["id"], "label": "visits",
        "userId": "u1"}).status_code == 404
    assert app_client.patch(f"/episodes/{world['u1']['episode']['id']}", headers=bearer(key),
                            json={"aiResponse": "changed"}).status_code == 200
    assert app_client.get(f"/episodes/{world['u2']['episode']['id']}").json()["aiResponse"] == "training plan"


def test_scopes_limit_what_a_key_may_do(app_client, world):
    reader = issue(app_client, userId="u1", scopes=["read"])
    assert app_client.get("/sessions", headers=bearer(reader)).status_code == 200
    assert app_client.post("/sessions", headers=bearer(reader), json={"externalId": "r", "userId": "u1"}
                           ).status_code == 403
    assert app_client.delete("/users/u1", headers=bearer(reader)).status_code == 403
    forgetter = issue(app_client, userId="u1", scopes=["read", "forget"])
    assert app_client.delete("/users/u2", headers=bearer(forgetter)).status_code == 403
    forgotten = app_client.delete("/users/u1", headers=bearer(forgetter))
    assert forgotten.status_code == 200 and forgotten.json()["sessions"] == 1
    assert app_client.get(f"/sessions/{world['u2']['session']['id']}").status_code == 200


def test_a_key_bound_to_an_agent_changes_its_users_entities_as_it_creates_them(app_client, world):
    # Entities and relationships belong to a user alone: the agent's key upserted them but got a
    # 403 on PATCH and DELETE, even of those it had made. An agent's sessions stay its own.
    agent = bearer(issue(app_client, userId="u1", agentId="a1"))
    person = world["u1"]["person"]
    assert app_client.patch(f"/entities/{person['id']}", headers=agent, json={"notes": "by a1"}).status_code == 200
    made = app_client.post("/entities", headers=agent, json={"name": "Kit", "type": "cat", "userId": "u1"}).json()
    edge = {"fromId": person["id"], "toId": made["id"], "label": "has"}
    assert app_client.post("/relationships", headers=agent, json={**edge, "userId": "u1"}).status_code == 201
    assert app_client.request("DELETE", "/relationships", headers=agent, json=edge).status_code == 204
    assert app_client.delete(f"/entities/{made['id']}", headers=agent).status_code == 204
    others = app_client.post("/sessions", json={"externalId": "a2-chat", "userId": "u1", "agentId": "a2"}).json()
    assert app_client.delete(f"/sessions/{others['id']}", headers=agent).status_code in (403, 404)
    other_entity = world["u2"]["person"]["id"]
    assert app_client.patch(f"/entities/{other_entity}", headers=agent, json={"notes": "x"}).status_code == 404


def test_a_bound_key_deleting_a_triple_it_holds_only_globally_is_refused_not_told_it_is_absent(app_client):
    one = app_client.post("/entities", json={"name": "Lisbon", "type": "city"}).json()
    two = app_client.post("/entities", json={"name": "Porto", "type": "city"}).json()
    edge = {"fromId": one["id"], "toId": two["id"], "label": "near"}
    app_client.post("/relationships", json=edge)
    app_client.post("/relationships", json={**edge, "userId": "u2"})
    key = bearer(issue(app_client, userId="u1"))
    assert app_client.request("DELETE", "/relationships", headers=key, json=edge).status_code == 403
    assert app_client.request("DELETE", "/relationships", json={**edge, "userId": "u2"}).status_code == 204
    assert [r.get("userId") for r in app_client.get(f"/entities/{one['id']}/relationships").json()] == [None]


def test_an_agents_keyword_search_finds_its_few_episodes_among_its_users_many(app_client):
    # The index narrows to the user; the agent's own (or no agent's) are picked from a deeper list.
    busy = app_client.post("/sessions", json={"externalId": "a2", "userId": "u1", "agentId": "a2"}).json()
    app_client.post("/episodes/batch", json={"episodes": [
        {"sessionId": busy["id"], "userMessage": "kite kite", "aiResponse": "kite"}] * 50})
    mine = app_client.post("/sessions", json={"externalId": "a1", "userId": "u1", "agentId": "a1"}).json()
    episode = app_client.post("/episodes", json={"sessionId": mine["id"], "userMessage": "a kite",
                                                 "aiResponse": "on a long windy day at the beach"}).json()
    key = bearer(issue(app_client, userId="u1", agentId="a1"))
    hits = app_client.get("/episodes/search?q=kite&limit=5", headers=key).json()["results"]
    assert [h["episode"]["id"] for h in hits] == [episode["id"]]


def test_an_unbound_key_without_global_read_still_gets_global_entities_in_context(app_client):
    # globalRead binds only keys bound to a user: an unbound key reads everything.
    session = app_client.post("/sessions", json={"externalId": "plain"}).json()
    app_client.post("/episodes", json={"sessionId": session["id"], "userMessage": "I love Lisbon", "aiResponse": "ok"})
    app_client.post("/entities", json={"name": "Lisbon", "type": "city"})
    key = bearer(issue(app_client, globalRead=False))
    package = app_client.post("/context", headers=key, json={"query": "Lisbon", "sessionId": session["id"],
                                                             "tokenBudget": 500}).json()
    assert [e["name"] for e in package["entities"]] == ["Lisbon"]


def test_a_key_bound_to_an_agent_cannot_forget_its_user(app_client, world):
    # Forgetting u1 removes every agent's records of u1, which an agent's key cannot see.
    agents = issue(app_client, userId="u1", agentId="a1", scopes=["read", "write", "forget"])
    refused = app_client.delete("/users/u1", headers=bearer(agents))
    assert refused.status_code == 403 and refused.json()["field"] == "userId"
    assert app_client.get(f"/sessions/{world['u1']['session']['id']}").status_code == 200


def test_history_and_the_feed_of_a_bound_key(app_client, world):
    key = issue(app_client, userId="u1")
    app_client.patch(f"/entities/{world['u2']['person']['id']}", json={"notes": "u2 private note"})
    assert app_client.get(f"/entities/{world['u2']['person']['id']}/history", headers=bearer(key)).json()["items"] == []
    events = app_client.get("/events", headers=bearer(key)).json()["events"]
    assert events and all(e["userId"] in ("u1", None) for e in events)


def test_history_records_the_key_as_the_actor_of_its_changes(app_client, world):
    created = app_client.post("/admin/keys", json={"name": "writer", "userId": "u1"}).json()
    entity = world["u1"]["person"]["id"]
    app_client.patch(f"/entities/{entity}", headers={**bearer(created["key"]), "X-Actor": "someone-else"},
                     json={"notes": "n"})
    app_client.patch(f"/entities/{entity}", json={"notes": "m"})
    actors = [v["actor"] for v in app_client.get(f"/entities/{entity}/history").json()["items"]]
    assert actors == [f"key:{created['id']} (someone-else)", "key:admin"]


def test_a_revoked_or_expired_key_is_refused(app_client):
    created = app_client.post("/admin/keys", json={"name": "short", "userId": "u1"}).json()
    assert app_client.get("/sessions", headers=bearer(created["key"])).status_code == 200
    assert app_client.delete(f"/admin/keys/{created['id']}").json()["revokedAt"] is not None
    assert app_client.get("/sessions", headers=bearer(created["key"])).status_code == 401
    expired = issue(app_client, userId="u1", expiresAt="2001-01-01T00:00:00Z")
    assert app_client.get("/sessions", headers=bearer(expired)).status_code == 401
    assert app_client.get("/sessions", headers=bearer("nxm_" + "A" * 43)).status_code == 401
    assert app_client.delete("/admin/keys/999").status_code == 404


def test_a_key_past_its_rate_gets_429_with_retry_after(app_client):
    key = issue(app_client, userId="u1", rateLimit=0.01)
    assert app_client.get("/sessions", headers=bearer(key)).status_code == 200
    limited = app_client.get("/sessions", headers=bearer(key))
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert app_client.get("/sessions").status_code == 200  # the bootstrap key has no per-key limit


def test_bad_key_bodies_are_400s_naming_the_field(app_client):
    for body, field in (({"name": "x", "scopes": ["root"]}, "scopes"),
                        ({"name": "x", "userId": "u", "scopes": ["admin"]}, "scopes"),
                        ({"name": "x", "agentId": "a"}, "agentId"),
                        ({"name": "x", "expiresAt": "soon"}, "expiresAt"),
                        ({"name": "x", "owner": "u"}, "owner")):
        answer = app_client.post("/admin/keys", json=body)
        assert answer.status_code == 400 and answer.json()["field"].startswith(field), (body, answer.text)


def test_metrics_need_a_key_not_bound_to_a_user_and_the_docs_are_open(app_client):
    key = issue(app_client, userId="u1")
    assert app_client.get("/metrics", headers=bearer(key)).status_code == 403
    assert app_client.get("/metrics").status_code == 200
    assert app_client.get("/schema/openapi.json", headers={"Authorization": ""}).status_code == 200


@pytest.mark.parametrize("spelling", ["/sessions/{id}/", "//sessions/{id}", "/sessions//{id}", "/%73essions/{id}",
                                      "/episodes/../sessions/{id}", "http://elsewhere.example/sessions/{id}"])
def test_every_spelling_of_a_path_meets_the_same_check(app_client, world, spelling):
    key = issue(app_client, userId="u1")
    path = spelling.format(id=world["u2"]["session"]["id"])
    assert app_client.get(path, headers={"Authorization": ""}).status_code in (401, 404)
    answer = app_client.get(path, headers=bearer(key))
    assert answer.status_code in (404, 401) and "u2" not in answer.text


def test_mcp_refuses_a_host_it_does_not_serve(app_client):
    request = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    refused = app_client.post("/mcp", json=request, headers={"Host": "attacker.example"})
    assert refused.status_code == 403 and "MCP_ALLOWED_HOSTS" in refused.json()["message"]
    foreign = app_client.post("/mcp", json=request, headers={"Host": "localhost:3002", "Origin": "http://evil.example"})
    assert foreign.status_code == 403


def test_another_owners_edge_between_global_entities_neither_blocks_nor_is_changed_by_a_bound_key(app_client):
    # u1 relating, superseding or deleting the triple u2 holds touches u1's own edge only, and
    # answers as if u2's did not exist.
    one = app_client.post("/entities", json={"name": "Lisbon", "type": "city"}).json()
    two = app_client.post("/entities", json={"name": "Porto", "type": "city"}).json()
    three = app_client.post("/entities", json={"name": "Braga", "type": "city"}).json()
    edge = {"fromId": one["id"], "toId": two["id"], "label": "near"}
    theirs = app_client.post("/relationships", json={**edge, "userId": "u2", "metadata": {"by": "u2"}}).json()
    app_client.post("/relationships", json={**edge, "toId": three["id"], "userId": "u2"})
    key = bearer(issue(app_client, userId="u1"))
    assert app_client.request("DELETE", "/relationships", headers=key, json=edge).status_code == 404
    mine = app_client.post("/relationships", headers=key, json={**edge, "userId": "u1", "supersedes": True})
    assert mine.status_code == 201 and mine.json()["id"] != theirs["id"] and mine.json()["userId"] == "u1"
    assert app_client.request("DELETE", "/relationships", headers=key, json={**edge, "userId": "u2"}).status_code == 403
    assert app_client.request("DELETE", "/relationships", headers=key, json=edge).status_code == 204
    kept = app_client.get(f"/entities/{one['id']}/relationships").json()
    assert sorted((r["userId"], r["toId"], r.get("validTo"), r["metadata"]) for r in kept) == [
        ("u2", two["id"], None, {"by": "u2"}), ("u2", three["id"], None, {})]


def test_an_open_service_issues_no_keys_over_http(client):
    refused = client.post("/admin/keys", json={"name": "anyone", "scopes": ["admin"]})
    assert refused.status_code == 403 and "memory-service keys" in refused.json()["message"]
    assert client.get("/sessions").status_code == 200  # still open: nobody closed it for everyone else
    assert client.post("/admin/keys", json={"name": "x", "scopes": ["root"]}).status_code == 400


def test_a_service_closed_by_stored_keys_stays_closed_to_unknown_paths_after_a_key_is_made(make_settings):
    # No MEMORY_API_KEY: the first stored key closes the service. Making another one over HTTP must
    # not make the router's own 404/405 answer anonymous callers again (they would map the routes).
    app = create_app(make_settings())
    with TestClient(app) as client:
        keys = app.state["container"].keys()
        admin = client.blocking_portal.call(lambda: keys.create("admin", scopes=["admin", "read", "write"])).secret
        app.state["container"].authenticator().forget()
        assert client.get("/sessions").status_code == 401  # closed, and now known to be
        assert client.post("/admin/keys", json={"name": "u1", "userId": "u1"}, headers=bearer(admin)).status_code == 201
        assert client.get("/no-such-route").status_code == 401
        assert client.request("PUT", "/sessions").status_code == 401


def test_creating_a_key_refuses_an_idempotency_key_instead_of_ignoring_it(app_client):
    # Its answer holds the secret, which is never stored, so it cannot be replayed; a retry that
    # trusted a silently ignored key would make a second live key.
    before = len(app_client.get("/admin/keys").json())
    refused = app_client.post("/admin/keys", json={"name": "retried"}, headers={"Idempotency-Key": "k-1"})
    body = assert_error(refused, 400, "Idempotency-Key")
    assert "secret" in body["message"] and "GET /admin/keys" in body["message"]
    assert len(app_client.get("/admin/keys").json()) == before
    assert app_client.post("/admin/keys", json={"name": "plain"}).status_code == 201


def test_a_bound_key_cannot_rewrite_another_users_closed_edge_by_its_valid_from(app_client, world):
    # An edge u1 closed, named again by the triple and the validFrom it began at, is u1's: u2's
    # upsert makes u2's own edge.
    city = app_client.post("/entities", json={"name": "Porto", "type": "city"}).json()
    span = {"fromId": world["global"]["id"], "toId": city["id"], "label": "held_in",
            "validFrom": "2020-01-01T00:00:00Z", "validTo": "2021-01-01T00:00:00Z"}
    edge = app_client.post("/relationships", json={**span, "userId": "u1", "metadata": {"by": "u1"}}).json()
    u2 = issue(app_client, userId="u2")
    answer = app_client.post("/relationships", json={**span, "userId": "u2", "metadata": {"by": "u2"}},
                             headers=bearer(u2))
    assert answer.status_code == 201 and answer.json()["id"] != edge["id"] and "u1" not in answer.text
    [kept] = [r for r in app_client.get(f"/entities/{world['global']['id']}/relationships").json()
              if r["id"] == edge["id"]]
    assert kept["metadata"] == {"by": "u1"}


def test_another_users_many_records_never_crowd_a_bound_keys_few_out_of_its_lists_and_searches(app_client):
    # u2's records sort and rank ahead of u1's and outnumber every page and search depth.
    session = app_client.post("/sessions", json={"externalId": "u2-busy", "userId": "u2"}).json()
    for _ in range(2):
        assert app_client.post("/episodes/batch", json={"episodes": [
            {"sessionId": session["id"], "userMessage": "kite kite kite", "aiResponse": "kite"}] * 600}).status_code == 201
    for n in range(60):
        app_client.post("/entities", json={"name": f"Aa kite {n:02}", "type": "person", "userId": "u2"})
    mine = app_client.post("/sessions", json={"externalId": "u1-chat", "userId": "u1"}).json()
    episode = app_client.post("/episodes", json={"sessionId": mine["id"], "userMessage": "a kite at the beach",
                                                 "aiResponse": "windy, long words about the weather"}).json()
    person = app_client.post("/entities", json={"name": "Zoe kite", "type": "person", "userId": "u1"}).json()
    key = bearer(issue(app_client, userId="u1"))
    page = app_client.get("/entities/by-type/person?limit=10", headers=key).json()
    assert [e["id"] for e in page["items"]] == [person["id"]] and page["total"] == 1
    assert [e["id"] for e in app_client.get("/entities/search?name=kite&limit=5", headers=key).json()] == [person["id"]]
    hits = app_client.get("/episodes/search?q=kite&limit=5", headers=key).json()
    assert [h["episode"]["id"] for h in hits["results"]] == [episode["id"]]


@pytest.mark.parametrize("host", ["memory.internal", "MEMORY.Internal:3002", "LOCALHOST:3002"])
def test_mcp_answers_every_host_it_is_configured_for_in_any_case(make_settings, host):
    # Bound to loopback, the MCP SDK would add its own host check, with its own list and exact
    # (case-sensitive) matching: MCP_ALLOWED_HOSTS alone decides, and host names have no case.
    settings = make_settings(memory_api_key=ADMIN_KEY, host="127.0.0.1",
                             mcp_allowed_hosts=("memory.internal", "localhost"))
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    with TestClient(create_app(settings)) as client:
        answer = client.post("/mcp", json=request, headers={
            **bearer(ADMIN_KEY), "Host": host, "Accept": "application/json, text/event-stream"})
    assert answer.status_code == 200, answer.text
    assert "serverInfo" in answer.text
