"""The client's keyset lists and partial updates, sync and async, against a real
``memory-service serve`` process."""

from __future__ import annotations

import asyncio

import pytest

from nexusai_memory_client import AsyncMemoryClient, CursorPage, Episode, MemoryClient, MemoryServiceError
from tests.support.server import ServiceProcess, service_env


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServiceProcess(service_env(tmp_path_factory.mktemp("lists") / "memory.db")) as process:
        yield process


def test_the_sync_client_lists_by_cursor_and_patches(server):
    with MemoryClient(server.url) as memory:
        session = memory.create_session(external_id="lists")
        made = [memory.create_episode(session_id=session.id, user_message=f"m{n}", ai_response="ok",
                                      metadata={"n": n}) for n in range(5)]
        seen, cursor = [], None
        while True:
            page = memory.list_episodes(session_id=session.id, order="desc", limit=2, cursor=cursor)
            assert isinstance(page, CursorPage) and all(isinstance(e, Episode) for e in page.items)
            seen += [e.id for e in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == [e.id for e in made][::-1]
        odd = memory.list_episodes(filter={"metadata": {"n": {"in": [1, 3]}}})
        assert [e.id for e in odd.items] == [made[1].id, made[3].id]
        assert [s.id for s in memory.list_sessions_by_cursor(order="desc").items][:1] == [session.id]

        ana = memory.upsert_entity(name="Ana", type="person")
        rui = memory.upsert_entity(name="Rui", type="person")
        edge = memory.upsert_relationship(from_id=ana.id, to_id=rui.id, label="knows")
        assert [e.id for e in memory.list_entities(type="person").items] == [ana.id, rui.id]
        assert [r.id for r in memory.list_relationships(entity_id=rui.id, label="knows").items] == [edge.id]
        assert memory.update_entity(entity_id=ana.id, notes="a cellist").notes == "a cellist"
        with pytest.raises(MemoryServiceError) as caught:
            memory.update_entity(entity_id=rui.id, name="Ana")
        assert (caught.value.status, caught.value.field) == (409, "name")

        summary = memory.create_summary(session_id=session.id, content="five messages")
        changed = memory.update_summary(summary_id=summary.id, content="five short messages", episode_count=5)
        assert (changed.content, changed.episode_count) == ("five short messages", 5)
        assert [s.id for s in memory.list_summaries(session_id=session.id).items] == [summary.id]
        with pytest.raises(MemoryServiceError) as bad:
            memory.list_episodes(cursor="not-a-cursor")
        assert (bad.value.status, bad.value.field) == (400, "cursor")


def test_the_async_client_lists_and_patches(server):
    async def main() -> None:
        async with AsyncMemoryClient(server.url) as memory:
            session = await memory.create_session(external_id="lists-async")
            first = await memory.create_episode(session_id=session.id, user_message="a", ai_response="b")
            page = await memory.list_episodes(session_id=session.id)
            assert [e.id for e in page.items] == [first.id] and page.next_cursor is None
            entity = await memory.upsert_entity(name="Pixel", type="cat")
            assert (await memory.update_entity(entity_id=entity.id, type="kitten")).type == "kitten"
            assert [e.id for e in (await memory.list_entities(type="kitten")).items] == [entity.id]
            assert (await memory.list_relationships(entity_id=entity.id)).items == []
            assert (await memory.list_summaries(session_id=session.id)).items == []
            assert (await memory.list_sessions_by_cursor(limit=1)).limit == 1
            summary = await memory.create_summary(session_id=session.id, content="x")
            assert (await memory.update_summary(summary_id=summary.id, metadata={"v": 1})).metadata == {"v": 1}

    asyncio.run(main())
