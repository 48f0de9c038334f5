"""MCP over streamable HTTP (``serve``'s ``/mcp``) with a key bound to one user: every tool sees
and changes only that user's memories, as the REST API does for the same key."""

from __future__ import annotations

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.test_mcp import call, error_of
from tests.support.server import ServiceProcess, run_service, service_env

ADMIN = "mcp-admin-key"


async def test_a_bound_key_over_mcp_sees_only_its_users_memories(tmp_path):
    env = service_env(tmp_path / "memory.db", {"MEMORY_API_KEY": ADMIN})
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with ServiceProcess(env) as server:
        base = server.url
        key = httpx.post(f"{base}/admin/keys", headers=admin, json={"name": "assistant", "userId": "u1"}).json()["key"]
        theirs = httpx.post(f"{base}/sessions", headers=admin, json={"externalId": "u2-chat", "userId": "u2"}).json()
        httpx.post(f"{base}/episodes", headers=admin, json={"sessionId": theirs["id"], "userMessage": "secret tuna plan",
                                                            "aiResponse": "noted"})
        hidden = httpx.post(f"{base}/entities", headers=admin, json={"name": "Bob", "type": "person",
                                                                     "userId": "u2"}).json()

        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"})
        async with http, Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            stored = await call(client, "remember", session="u1-chat", user_message="I like tuna too",
                                ai_response="Good to know")
            assert stored["session"]["userId"] == "u1"  # the key's user, without naming it
            assert "forbidden" in await error_of(client, "remember", session="x", user_message="a", ai_response="b",
                                                 user_id="u2")
            hits = (await call(client, "search", query="tuna"))["hits"]
            assert [h["episode"]["userMessage"] for h in hits] == ["I like tuna too"]
            assert "not_found" in await error_of(client, "session_history", session="u2-chat")
            assert "not_found" in await error_of(client, "get_entity", entity_id=hidden["id"])
            assert [s["userId"] for s in (await call(client, "list_sessions"))["items"]] == ["u1"]
            assert (await call(client, "find_entities", name="Bob"))["entities"] == []
            mine = (await call(client, "upsert_entity", name="Tuna", type="food"))["entity"]
            assert mine["userId"] == "u1"
        assert server.stop() == 0


async def test_the_standalone_mcp_server_takes_stored_keys_with_their_owner(tmp_path):
    env = service_env(tmp_path / "memory.db", {"MEMORY_API_KEY": ADMIN})
    made = run_service(["keys", "create", "--name", "assistant", "--user", "u7"], env)
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip().splitlines()[-1]
    with ServiceProcess(env, verb=("mcp", "--transport", "streamable-http")) as server:
        assert httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={"Authorization": "Bearer nxm_unknown"}).status_code == 401
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"})
        async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
            stored = await call(client, "remember", session="s7", user_message="hello", ai_response="hi")
            assert stored["session"]["userId"] == "u7"
            assert "forbidden" in await error_of(client, "list_sessions", user_id="u8")
        assert server.stop() == 0
