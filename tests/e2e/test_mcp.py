"""``memory-service mcp`` driven by the MCP SDK's own client: over stdio (the client spawns the
command, as an assistant does) and over streamable HTTP (a real server process)."""

from __future__ import annotations

import asyncio
import os

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.server import ServiceProcess, service_command, service_env

API_KEY = "mcp-secret-key"
TOOLS = {"remember", "search", "build_context", "list_sessions", "session_history", "recent_memories", "upsert_entity",
         "find_entities", "get_entity", "relate", "history"}


async def call(client: Client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def error_of(client: Client, tool: str, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text


async def test_an_assistant_remembers_and_recalls_over_stdio(tmp_path):
    db = tmp_path / "memory.db"
    command, *args = service_command()
    params = StdioServerParameters(command=command, args=[*args, "mcp"], env=service_env(db), cwd=str(tmp_path))
    async with Client(params) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        first = await call(client, "remember", session="chat-7", user_message="I adopted a grey kitten named Pixel",
                           ai_response="Pixel is a lovely name!", metadata={"mood": "happy"})
        assert first["session"]["externalId"] == "chat-7" and first["episode"]["metadata"] == {"mood": "happy"}
        second = await call(client, "remember", session="chat-7", user_message="I moved to Lisbon",
                            ai_response="Noted: Lisbon.")
        assert second["session"]["id"] == first["session"]["id"]  # the session is found, not created again
        await call(client, "remember", session="chat-8", user_message="Another conversation", ai_response="Yes.")

        found = await call(client, "search", query="kitten Pixel", session="chat-7")
        assert [hit["id"] for hit in found["hits"]][:1] == [first["episode"]["id"]]
        package = await call(client, "build_context", query="where do I live?", session="chat-7", token_budget=500)
        assert [e["id"] for e in package["recentEpisodes"]] == [first["episode"]["id"], second["episode"]["id"]]
        assert (await call(client, "list_sessions"))["total"] == 2
        history = await call(client, "session_history", session="chat-7", limit=1)
        assert history["total"] == 2 and len(history["items"]) == 1
        newest = await call(client, "recent_memories", limit=2)
        assert [e["userMessage"] for e in newest["items"]] == ["Another conversation", "I moved to Lisbon"]
        rest = await call(client, "recent_memories", limit=2, cursor=newest["nextCursor"])
        assert [e["id"] for e in rest["items"]] == [first["episode"]["id"]] and rest["nextCursor"] is None
        happy = await call(client, "recent_memories", session="chat-7", filter={"metadata": {"mood": "happy"}})
        assert [e["id"] for e in happy["items"]] == [first["episode"]["id"]]
        assert "cursor" in await error_of(client, "recent_memories", cursor="garbage")

        ana = (await call(client, "upsert_entity", name="Ana", type="person", notes="the user"))["entity"]
        lisbon = await call(client, "upsert_entity", name="Lisbon", type="place")
        assert lisbon["created"] is True
        edge = await call(client, "relate", from_id=ana["id"], label="lives_in", to_id=lisbon["entity"]["id"])
        looked_up = await call(client, "get_entity", entity_id=lisbon["entity"]["id"])
        assert [r["id"] for r in looked_up["relationships"]] == [edge["relationship"]["id"]]
        assert [e["name"] for e in looked_up["related"]] == ["Ana"]
        assert [e["name"] for e in (await call(client, "find_entities", name="lis"))["entities"]] == ["Lisbon"]

        # Owners: a user's memory spans their sessions; metadata filters and minScore narrow a search.
        mine = await call(client, "remember", session="alice-1", user_id="alice", user_message="penguins swim",
                          ai_response="ok", metadata={"topic": "birds"})
        assert mine["session"]["userId"] == "alice"
        await call(client, "remember", session="alice-2", user_id="alice", user_message="penguins dive",
                   ai_response="ok", metadata={"topic": "fish"})
        # A session's owner is set once: an exchange remembered in it for someone else is refused
        # (it was stored silently in alice's session), like search's sessionId/userId mismatch.
        assert "userId" in await error_of(client, "remember", session="alice-1", user_id="bob", user_message="hi",
                                          ai_response="ok")
        assert "agentId" in await error_of(client, "remember", session="alice-1", agent_id="bot", user_message="hi",
                                           ai_response="ok")
        # A number sent as text is refused by the strict argument model, naming the argument (a
        # non-finite float that reaches the domain is refused there as minScore, see SearchQuery).
        assert "min_score" in await error_of(client, "search", query="penguins", min_score="NaN")
        assert "bogus" in await error_of(client, "search", query="penguins", bogus=1)
        scoped = await call(client, "search", query="penguins", user_id="alice", metadata={"topic": "birds"})
        assert [h["id"] for h in scoped["hits"]] == [mine["episode"]["id"]]
        assert (await call(client, "search", query="penguins", user_id="bob"))["hits"] == []
        spanning = await call(client, "build_context", query="penguins", user_id="alice", token_budget=500)
        assert len(spanning["relevantEpisodes"]) == 2
        assert (await call(client, "list_sessions", user_id="alice"))["total"] == 2
        assert (await call(client, "upsert_entity", name="Ana", type="person", user_id="alice"))["created"] is True
        porto = (await call(client, "upsert_entity", name="Porto", type="place"))["entity"]
        moved = await call(client, "relate", from_id=ana["id"], label="lives_in", to_id=porto["id"], supersedes=True,
                           valid_from="2025-06-01T00:00:00Z")
        assert moved["relationship"]["validFrom"] == "2025-06-01T00:00:00.000Z"
        changed = await call(client, "history", kind="relationships", record_id=edge["relationship"]["id"])
        assert [v["changed"] for v in changed["items"]] == [["validTo"]]
        assert changed["items"][0]["after"]["validTo"] == "2025-06-01T00:00:00.000Z"

    # The tools wrote to the same store the REST API serves.
    with ServiceProcess(service_env(db)) as rest:
        session = httpx.get(f"{rest.url}/sessions/by-external/chat-7").json()
        assert httpx.get(f"{rest.url}/sessions/{session['id']}/episodes").json()["total"] == 2
        assert httpx.get(f"{rest.url}/entities/{ana['id']}/relationships").json()[0]["label"] == "lives_in"


async def test_streamable_http_needs_the_key_and_answers_bad_input_with_tool_errors(tmp_path):
    env = service_env(tmp_path / "memory.db", {"MEMORY_API_KEY": API_KEY})
    with ServiceProcess(env, verb=("mcp", "--transport", "streamable-http")) as server:
        refused = httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"

        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {API_KEY}"})
        async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
            assert "does not exist" in await error_of(client, "build_context", query="cat", session="never-seen")
            invalid = await error_of(client, "search", query="", limit=5000)
            assert "query" in invalid and "limit" in invalid
            assert "unknown ranker 'nope'" in await error_of(client, "search", query="cat", ranker="nope")
            assert "not_found" in await error_of(client, "relate", from_id=41, label="knows", to_id=42)
            assert "must not both be empty" in await error_of(client, "remember", session="s", user_message=" ",
                                                              ai_response="")

            episode = (await call(client, "remember", session="s", user_message="My cat Tom loves tuna",
                                  ai_response="Tom sounds adorable!"))["episode"]
            # The embedding worker runs in the MCP process too: the vector leg finds the episode.
            for _ in range(200):
                hits = (await call(client, "search", query="tuna", session="s"))["hits"]
                if hits and hits[0]["vector"] is not None:
                    break
                await asyncio.sleep(0.1)
            assert hits[0]["id"] == episode["id"] and hits[0]["vector"] is not None
        assert server.stop() == 0


# With several workers (over a Qdrant server: the engines they share) the endpoint is stateless: any worker answers.
SEVERAL = {"WORKERS": "2", "VECTOR_INDEX": "server", "QDRANT_URL": os.environ.get("QDRANT_URL", "")}


@pytest.mark.parametrize("workers", [{"WORKERS": "1"}, pytest.param(SEVERAL, marks=pytest.mark.skipif(
    not os.environ.get("QDRANT_URL"), reason="QDRANT_URL is not set: no real Qdrant server"))])
async def test_serve_also_speaks_mcp_at_slash_mcp_over_the_same_store(tmp_path, workers):
    env = service_env(tmp_path / "memory.db", {"MEMORY_API_KEY": API_KEY, **workers})
    auth = {"Authorization": f"Bearer {API_KEY}"}
    with ServiceProcess(env) as server:
        assert httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 401
        for attempt in range(3):  # fresh clients (fresh connections): with two workers, likely both are reached
            http = httpx2.AsyncClient(headers=auth)
            async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
                assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
                stored = await call(client, "remember", session="web-1", user_message="I adopted a grey kitten named Pixel",
                                    ai_response="Pixel is a lovely name!")
                assert "does not exist" in await error_of(client, "session_history", session="web-2")
                history = await call(client, "session_history", session="web-1")
                assert history["total"] == attempt + 1
        rest = httpx.get(f"{server.url}/episodes/{stored['episode']['id']}", headers=auth).json()
        assert rest["userMessage"] == "I adopted a grey kitten named Pixel"
        assert httpx.get(f"{server.url}/sessions/by-external/web-1", headers=auth).json()["id"] == rest["sessionId"]
        assert server.stop() == 0
