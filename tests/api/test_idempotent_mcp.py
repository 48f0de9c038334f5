"""The MCP write tools take ``idempotency_key``: a repeated call answers the first result, writes once."""

from __future__ import annotations

import asyncio

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from app.container import build_container, shutdown
from app.mcp_server import build_server


def _scenario(make_settings, body) -> None:
    async def run() -> None:
        container = build_container(make_settings())
        await container.store_resource()
        try:
            await body(container, build_server(container))
        finally:
            await shutdown(container)

    asyncio.run(run())


def test_remember_repeated_with_its_key_stores_one_exchange_and_answers_alike(make_settings):
    async def body(container, server) -> None:
        call = {"session": "c1", "user_message": "I like tea", "ai_response": "Noted.", "idempotency_key": "k-1"}
        first = (await server.call_tool("remember", call)).structured_content
        again = (await server.call_tool("remember", call)).structured_content
        assert again == {**first, "replayed": True} and "replayed" not in first
        session = await container.sessions().by_external_id("c1")
        assert (await container.episodes().of_session(session.id, 10, 0)).total == 1

    _scenario(make_settings, body)


def test_a_tool_key_reused_with_other_arguments_is_a_tool_error_and_writes_nothing(make_settings):
    async def body(container, server) -> None:
        await server.call_tool("upsert_entity", {"name": "Ada", "type": "person", "idempotency_key": "k-2"})
        with pytest.raises(ToolError, match="idempotency_key 'k-2' was already used"):
            await server.call_tool("upsert_entity", {"name": "Bob", "type": "person", "idempotency_key": "k-2"})
        assert await container.entities().find_by_name("Bob", 10) == []

    _scenario(make_settings, body)


def test_relate_without_a_key_writes_as_before(make_settings):
    async def body(container, server) -> None:
        ada = (await server.call_tool("upsert_entity", {"name": "Ada", "type": "person"})).structured_content
        lisbon = (await server.call_tool("upsert_entity", {"name": "Lisbon", "type": "city"})).structured_content
        edge = {"from_id": ada["entity"]["id"], "label": "lives_in", "to_id": lisbon["entity"]["id"],
                "idempotency_key": "k-3"}
        first = (await server.call_tool("relate", edge)).structured_content
        again = (await server.call_tool("relate", edge)).structured_content
        assert first["created"] is True and again["created"] is True and again["replayed"] is True
        assert len(await container.entities().relationships(ada["entity"]["id"], "out")) == 1

    _scenario(make_settings, body)
