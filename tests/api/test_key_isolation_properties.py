"""Property: for random owners, records and keys, no read path a key can reach (every REST list,
lookup, search and context, a record's history, the change feed, and the services the MCP tools
call) ever answers a record of another owner. Over the in-memory store, through the real app."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from app.main import create_app
from domain.access import Principal
from domain.scoped import Services, scoped

ADMIN = "property-admin-key"
USERS = ("alice", "bob", "carol")
OWNERS = (*USERS, None)
_serial = itertools.count()

records = st.lists(st.tuples(st.sampled_from(OWNERS), st.sampled_from(("episode", "entity", "summary", "edge"))),
                   min_size=1, max_size=6)
keys = st.lists(st.tuples(st.sampled_from(USERS), st.booleans()), min_size=1, max_size=3)


def mark(owner: str | None) -> str:
    """A word in every text of ``owner``'s records: a record shows up in an answer iff its mark does."""
    return f"owner{owner or 'none'}"


def build(client: TestClient, owner: str | None, kind: str) -> list[str]:
    """One record of ``kind`` for ``owner`` (with what it needs), through the admin key; the paths
    that read it by id."""
    n, word = next(_serial), mark(owner)
    body = {"userId": owner} if owner else {}
    session = client.post("/sessions", json={"externalId": f"{word}-{n}", **body}).json()
    paths = [f"/sessions/{session['id']}", f"/sessions/{session['id']}/episodes", f"/sessions/by-external/{word}-{n}"]
    if kind == "episode":
        episode = client.post("/episodes", json={"sessionId": session["id"], "userMessage": f"memo {word}",
                                                 "aiResponse": f"reply {word}"}).json()
        client.patch(f"/episodes/{episode['id']}", json={"aiResponse": f"changed {word}"})
        paths += [f"/episodes/{episode['id']}", f"/episodes/{episode['id']}/history"]
    elif kind == "summary":
        summary = client.post("/summaries", json={"sessionId": session["id"], "content": f"memo {word}"}).json()
        paths += [f"/summaries/{summary['id']}", f"/sessions/{session['id']}/summaries"]
    else:
        entity = client.post("/entities", json={"name": f"memo {word} {n}", "type": "thing", **body}).json()
        client.patch(f"/entities/{entity['id']}", json={"notes": f"notes {word}"})
        paths += [f"/entities/{entity['id']}", f"/entities/{entity['id']}/history",
                  f"/entities/{entity['id']}/relationships?direction=both"]
        if kind == "edge":
            other = client.post("/entities", json={"name": f"other {word} {n}", "type": "thing", **body}).json()
            edge = client.post("/relationships", json={"fromId": entity["id"], "toId": other["id"], "label": "near",
                                                       **body}).json()
            paths.append(f"/relationships/{edge['id']}/history")
    return paths


LISTS = ("/sessions", "/sessions?order=desc", "/episodes", "/entities", "/relationships", "/summaries",
         "/entities/by-type/thing", "/episodes/search?q=memo", "/events?limit=1000")


def test_no_read_path_answers_another_owners_record(make_settings):
    with TestClient(create_app(make_settings(store="memory", memory_api_key=ADMIN))) as client:
        client.headers.update({"Authorization": f"Bearer {ADMIN}"})
        container = client.app.state["container"]
        plain = Services(container.sessions(), container.episodes(), container.entities(), container.summaries(),
                         container.users(), container.search(), container.context(), container.history(),
                         container.events())

        @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(made=records, holders=keys)
        def check(made, holders):
            by_id = [path for owner, kind in made for path in build(client, owner, kind)]
            everyone = client.get("/sessions?order=desc&limit=100").text  # the admin key sees them all
            assert all(mark(owner) in everyone for owner, _ in made)
            for user, global_read in holders:
                created = client.post("/admin/keys", json={"name": "p", "userId": user, "globalRead": global_read})
                auth = {"Authorization": f"Bearer {created.json()['key']}"}
                hidden = {mark(o) for o in OWNERS if o != user and (o is not None or not global_read)}
                answers = [client.get(path, headers=auth) for path in (*LISTS, *by_id)]
                answers.append(client.post("/search", headers=auth, json={
                    "query": "memo", "limit": 50, "sources": ["episodes", "entities", "summaries"]}))
                answers.append(client.post("/context", headers=auth, json={"query": "memo", "tokenBudget": 4000,
                                                                            "userId": user}))
                for answer in answers:
                    assert answer.status_code in (200, 404), (answer.request.url, answer.text)
                    if answer.status_code == 404:
                        continue  # it names only what was asked for
                    assert not any(word in answer.text for word in hidden), (answer.request.url, answer.text)
                    body = answer.json()
                    events = body.get("events", []) if isinstance(body, dict) else []
                    assert all(e.get("userId") in (user, None) for e in events)
                # What the MCP tools call beyond the routes above: lookups by name.
                with client.portal() as portal:
                    seen = portal.call(scoped(Principal(frozenset({"read"}), 1, user, global_read=global_read),
                                              plain).entities.find_by_name, "memo", 100)
                assert not any(word in entity.name for entity in seen for word in hidden)

        check()
