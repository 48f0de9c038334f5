"""Bad input is a clear 400 naming the problem, on every route and MCP tool:
undeclared or repeated query parameters, numbers in other spellings than plain decimal digits,
numbers and booleans sent as strings in bodies, null in PATCH (JSON Merge Patch), HEAD, and
``asOf`` on GET /relationships."""

from __future__ import annotations

import asyncio
import re

import pytest
from litestar.handlers import HTTPRouteHandler

from app.container import build_container, shutdown
from app.mcp_server import MCP_PATH, build_server
from mcp.server.mcpserver.exceptions import ToolError

EPISODE = {"userMessage": "u", "aiResponse": "a"}


def _error(response, field: str | None, status: int = 400) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == status and body["field"] == field, body
    if field is not None:
        assert field.split(".")[-1].split("[")[0] in body["message"], body
    return body


def _routes(app) -> list[tuple[str, str]]:
    """(method, concrete path) of every route handler the app serves, with path parameters filled in."""
    out = []
    for route in app.routes:
        if route.path.startswith(MCP_PATH):
            continue
        for handler in getattr(route, "route_handlers", ()):
            if not isinstance(handler, HTTPRouteHandler) or "OPTIONS" in handler.http_methods:
                continue
            path = re.sub(r"\{(\w+):(\w+)\}", lambda m: "x" if m.group(2) == "path" or "external" in m.group(1)
                          or m.group(1) in ("user_id", "entity_type") else "1", route.path)
            out += [(method, path) for method in sorted(handler.http_methods)]
    return out


# -- query parameters -----------------------------------------------------------------------------
def test_every_route_refuses_a_query_parameter_it_does_not_declare(client):
    routes = _routes(client.app)
    assert len(routes) >= 35, routes
    for method, path in routes:
        response = client.request(method, path, params={"bogusParam": "1"}, json={} if method != "GET" else None)
        body = _error(response, "bogusParam")
        assert "unknown query parameter" in body["message"], (method, path, body)


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/entities", {"agentId": "x"}, "agentId"),  # entities have no agent: once silently the unscoped list
    ("/entities", {"sessionId": "1"}, "sessionId"),
    ("/relationships", {"agentId": "x"}, "agentId"),
    ("/episodes/search", {"q": "a", "limt": "5"}, "limt"),
    ("/sessions", {"user_id": "ana"}, "user_id"),  # the wire name is userId
    ("/health", {"verbose": "1"}, "verbose"),
])
def test_a_misspelt_or_inapplicable_query_parameter_is_a_400_naming_it_and_the_allowed_ones(client, path, params, field):
    body = _error(client.get(path, params=params), field)
    assert "this route takes" in body["message"]


def test_the_documented_parameters_still_work(client, session_id):
    client.post("/episodes", json={"sessionId": session_id, **EPISODE})
    assert client.get("/sessions/by-external", params={"externalId": "conv-1"}).json()["id"] == session_id
    page = client.get("/episodes", params={"limit": "1", "order": "desc", "sessionId": str(session_id)}).json()
    assert len(page["items"]) == 1
    assert client.get("/episodes", params={"cursor": page["nextCursor"] or "", "limit": "1"}).status_code in (200, 400)
    assert client.get("/episodes/search", params={"q": "u", "limit": "5", "match": "any"}).status_code == 200
    assert client.get("/events", params={"wait": "0.01", "after": "0", "limit": "10"}).status_code == 200


@pytest.mark.parametrize("query", ["limit=5&limit=6", "q=a&q=b", "limit=5&limit=5"])
def test_a_repeated_single_valued_parameter_is_a_400(client, query):
    field = query.split("=")[0]
    body = _error(client.get(f"/episodes/search?q=a&{query}" if field != "q" else f"/episodes/search?{query}"), field)
    assert "2 times" in body["message"] or "3 times" in body["message"]


@pytest.mark.parametrize("value", ["1e3", "%2B5", "%205", "5%20", "5.0", "%D9%A5", "%EF%BC%95", "0x5", "5_0", "", "1e999",
                                   "05", "-0", "5%00"])
def test_an_integer_query_parameter_is_plain_ascii_digits(client, session_id, value):
    for path in ("/episodes?", "/episodes/search?q=a&", "/sessions?", "/entities/by-type/person?"):
        _error(client.get(f"{path}limit={value}"), "limit")
    _error(client.get(f"/events?after={value}"), "after")
    _error(client.get(f"/sessions?offset={value}"), "offset")  # Offset | None: a number inside a union
    _error(client.get(f"/episodes?sessionId={value}"), "sessionId")
    _error(client.get(f"/sessions/{session_id}/episodes?offset={value}"), "offset")


@pytest.mark.parametrize("value", ["1e1", "NaN", "inf", "-inf", "0x1", "%2B1", ".5", "1.", "00.5", "-0"])
def test_a_number_query_parameter_is_plain_decimal(client, value):
    _error(client.get(f"/events?wait={value}"), "wait")


# -- bodies ---------------------------------------------------------------------------------------
LAX_BODIES = [
    ("POST", "/episodes", {"sessionId": "{sid!s}", **EPISODE}, "sessionId"),
    ("POST", "/episodes", {"sessionId": "{sid}", "tokenCount": "3", **EPISODE}, "tokenCount"),
    ("POST", "/episodes", {"sessionId": "{sid}", "tokenCount": 3.0, **EPISODE}, "tokenCount"),
    ("POST", "/episodes", {"sessionId": True, **EPISODE}, "sessionId"),
    ("POST", "/episodes/batch", {"episodes": [{"sessionId": "{sid!s}", **EPISODE}]}, "episodes[0].sessionId"),
    ("POST", "/summaries", {"sessionId": "{sid}", "content": "c", "episodeCount": "2"}, "episodeCount"),
    ("PATCH", "/summaries/{sum}", {"episodeCount": "2"}, "episodeCount"),
    ("PATCH", "/episodes/{eid}", {"tokenCount": "2"}, "tokenCount"),
    ("PATCH", "/entities/{ent}", {"name": 5}, "name"),
    ("POST", "/relationships", {"fromId": "{ent!s}", "toId": "{ent}", "label": "knows"}, "fromId"),
    ("POST", "/relationships", {"fromId": "{ent}", "toId": "{ent}", "label": "knows", "supersedes": "true"},
     "supersedes"),
    ("POST", "/relationships", {"fromId": "{ent}", "toId": "{ent}", "label": "knows", "supersedes": 1}, "supersedes"),
    ("DELETE", "/relationships", {"fromId": "{ent!s}", "toId": "{ent}", "label": "knows"}, "fromId"),
    ("POST", "/search", {"query": "x", "limit": "5"}, "limit"),
    ("POST", "/search", {"query": "x", "minScore": "0.5"}, "minScore"),
    ("POST", "/search", {"query": "x", "sessionId": "{sid!s}"}, "sessionId"),
    ("POST", "/context", {"query": "x", "sessionId": "{sid}", "tokenBudget": "100"}, "tokenBudget"),
    ("POST", "/sessions", {"externalId": 5}, "externalId"),
    ("PATCH", "/sessions/{sid}", {"metadata": "{}"}, "metadata"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), LAX_BODIES)
def test_a_body_number_or_boolean_in_another_type_is_a_400_naming_it_and_writes_nothing(
        client, session_id, method, path, body, field):
    episode = client.post("/episodes", json={"sessionId": session_id, "tokenCount": 1, **EPISODE}).json()["id"]
    entity = client.post("/entities", json={"name": "Ana", "type": "person"}).json()["id"]
    summary = client.post("/summaries", json={"sessionId": session_id, "content": "c"}).json()["id"]
    ids = {"{sid}": session_id, "{eid}": episode, "{ent}": entity, "{sum}": summary}

    def fill(value):
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, str) and value.endswith("!s}"):
            return str(ids[value.replace("!s}", "}")])
        return ids.get(value, value) if isinstance(value, str) else value

    for name, value in ids.items():
        path = path.replace(name, str(value))
    before = client.get("/events").json()["nextAfter"]
    _error(client.request(method, path, json=fill(body)), field)
    events = client.get("/events", params={"after": str(before)}).json()["events"]
    assert [e for e in events if e["op"] != "embedded"] == []  # the worker may finish embedding meanwhile


def test_a_duplicated_json_key_takes_its_last_value(client, session_id):
    # Documented behaviour (RFC 8259 leaves it to the parser; msgspec, like Python's json, keeps the last).
    raw = f'{{"sessionId": {session_id}, "userMessage": "first", "userMessage": "last", "aiResponse": "a"}}'
    created = client.post("/episodes", content=raw, headers={"content-type": "application/json"})
    assert created.status_code == 201 and created.json()["userMessage"] == "last"


# -- PATCH is JSON Merge Patch --------------------------------------------------------------------
def test_patch_null_clears_a_nullable_field_and_leaves_the_others(client, session_id):
    episode = client.post("/episodes", json={"sessionId": session_id, "tokenCount": 7, "metadata": {"k": 1},
                                             **EPISODE}).json()
    cleared = client.patch(f"/episodes/{episode['id']}", json={"tokenCount": None})
    assert cleared.status_code == 200 and cleared.json() == {**episode, "tokenCount": None}
    entity = client.post("/entities", json={"name": "Ana", "type": "person", "notes": "a cellist"}).json()
    patched = client.patch(f"/entities/{entity['id']}", json={"notes": None}).json()
    assert patched["notes"] is None and patched["name"] == "Ana"
    summary = client.post("/summaries", json={"sessionId": session_id, "content": "c", "firstEpisodeId": 1,
                                              "lastEpisodeId": 2, "tokenCount": 5, "episodeCount": 2}).json()
    after = client.patch(f"/summaries/{summary['id']}", json={"firstEpisodeId": None, "tokenCount": None}).json()
    assert (after["firstEpisodeId"], after["lastEpisodeId"], after["tokenCount"], after["episodeCount"]) == (None, 2, None, 2)
    assert client.get(f"/summaries/{summary['id']}").json() == after
    versions = client.get(f"/summaries/{summary['id']}/history").json()["items"]
    assert set(versions[-1]["changed"]) == {"firstEpisodeId", "tokenCount"}


@pytest.mark.parametrize(("kind", "field"), [
    ("episodes", "userMessage"), ("episodes", "aiResponse"), ("episodes", "metadata"),
    ("entities", "name"), ("entities", "type"), ("entities", "metadata"),
    ("summaries", "content"), ("summaries", "episodeCount"), ("summaries", "metadata"),
])
def test_patch_null_on_a_required_field_is_a_400_naming_it(client, session_id, kind, field):
    made = {"episodes": lambda: client.post("/episodes", json={"sessionId": session_id, **EPISODE}),
            "entities": lambda: client.post("/entities", json={"name": "Ana", "type": "person"}),
            "summaries": lambda: client.post("/summaries", json={"sessionId": session_id, "content": "c"})}[kind]().json()
    _error(client.patch(f"/{kind}/{made['id']}", json={field: None}), field)
    assert client.get(f"/{kind}/{made['id']}").json() == made


def test_the_domain_refuses_null_on_a_required_field_too():
    from domain.errors import Invalid
    from domain.models import EpisodeChanges, check_changes

    with pytest.raises(Invalid) as refused:
        check_changes(EpisodeChanges(user_message=None))  # type: ignore[arg-type]
    assert refused.value.field == "userMessage"
    check_changes(EpisodeChanges(token_count=None))


# -- HEAD -----------------------------------------------------------------------------------------
def test_head_answers_like_get_without_a_body(client, session_id):
    health = client.head("/health")  # its body changes from one answer to the next (ages): no length to compare
    assert health.status_code == 200 and health.content == b"" and int(health.headers["content-length"]) > 0
    for path in (f"/sessions/{session_id}", "/sessions", "/episodes?limit=2", "/rankers"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        assert head.headers["content-length"] == got.headers["content-length"]
    assert client.head("/sessions/999").status_code == 404
    assert client.head("/sessions", params={"bogus": "1"}).status_code == 400


def test_head_where_no_get_exists_is_a_405_with_allow_and_allow_names_head_beside_get(client, session_id):
    refused = client.head("/users/ana")
    assert refused.status_code == 405
    assert "HEAD" not in refused.headers["allow"] and "DELETE" in refused.headers["allow"]
    allow = [m.strip() for m in client.post(f"/sessions/{session_id}", json={}).headers["allow"].split(",")]
    assert {"GET", "HEAD", "PATCH", "DELETE"} <= set(allow)


# -- GET /relationships?asOf ----------------------------------------------------------------------
def test_listing_relationships_as_of_a_moment_keeps_the_edges_valid_then(client):
    ana, lisbon, porto = (client.post("/entities", json={"name": n, "type": t}).json()["id"]
                          for n, t in (("Ana", "person"), ("Lisbon", "city"), ("Porto", "city")))
    client.post("/relationships", json={"fromId": ana, "toId": lisbon, "label": "lives_in",
                                        "validFrom": "2020-01-01T00:00:00Z"})
    client.post("/relationships", json={"fromId": ana, "toId": porto, "label": "lives_in",
                                        "validFrom": "2024-01-01T00:00:00Z", "supersedes": True})

    def to_ids(**params):
        response = client.get("/relationships", params=params)
        assert response.status_code == 200, response.text
        return [r["toId"] for r in response.json()["items"]]

    assert to_ids() == [lisbon, porto]
    assert to_ids(asOf="2021-06-01T00:00:00Z") == [lisbon]
    assert to_ids(asOf="2024-01-01T00:00:00Z") == [porto]  # validFrom inclusive, the closed edge's validTo exclusive
    assert to_ids(asOf="2019-12-31T23:59:59Z", entityId=str(ana)) == []
    assert to_ids(asOf="2030-01-01T02:00:00+02:00", label="lives_in") == [porto]
    _error(client.get("/relationships", params={"asOf": "yesterday"}), "asOf")


# -- MCP ------------------------------------------------------------------------------------------
def test_mcp_tools_refuse_unknown_arguments_and_numbers_as_text(make_settings):
    async def scenario() -> None:
        container = build_container(make_settings())
        await container.store_resource()
        try:
            server = build_server(container)
            tools = {t.name: t for t in await server.list_tools()}
            assert all(t.input_schema.get("additionalProperties") is False for t in tools.values()), tools
            good = {"session": "c1", "user_message": "u", "ai_response": "a"}
            assert (await server.call_tool("remember", {**good, "token_count": 3})).is_error is False
            for bad, name in (({**good, "bogus": 1}, "bogus"), ({**good, "tokenCount": 1}, "tokenCount"),
                              ({**good, "token_count": "3"}, "token_count"),
                              ({**good, "token_count": 3.0}, "token_count")):
                with pytest.raises(ToolError, match=name):
                    await server.call_tool("remember", bad)
            for bad, name in (({"query": "x", "limit": "5"}, "limit"), ({"query": "x", "limit": True}, "limit"),
                              ({"query": "x", "min_score": "0.5"}, "min_score"), ({"query": "x", "q": "x"}, "q")):
                with pytest.raises(ToolError, match=name):
                    await server.call_tool("search", bad)
            with pytest.raises(ToolError, match="newest_first"):
                await server.call_tool("recent_memories", {"newest_first": "false"})
            # A list sent as JSON text is still unpacked (the SDK's allowance for some clients).
            assert (await server.call_tool("search", {"query": "x", "sources": '["episodes"]'})).is_error is False
        finally:
            await shutdown(container)

    asyncio.run(scenario())



def test_the_query_parameters_a_route_takes_are_exactly_those_its_openapi_entry_documents(client):
    # The guard derives what a route takes from its handler; the schema is derived from the same
    # signature. Any drift would make a documented parameter a 400, or an undocumented one pass.
    spec = client.get("/schema/openapi.json").json()
    checked = 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            documented = sorted(p["name"] for p in operation.get("parameters", ()) if p["in"] == "query")
            concrete = re.sub(r"\{[^}]+\}", "1", path).replace("/by-type/1", "/by-type/x").replace("/users/1", "/users/x")
            body = {} if method in ("post", "patch", "delete") else None
            refused = client.request(method.upper(), concrete, params={"zzUnknown": "1"}, json=body).json()
            assert refused["field"] == "zzUnknown", (method, path, refused)
            listed = refused["message"].split("this route takes: ")[1].rstrip(")")
            assert listed == (", ".join(documented) or "none"), (method, path, listed, documented)
            checked += 1
    assert checked >= 35
