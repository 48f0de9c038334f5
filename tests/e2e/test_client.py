"""The typed client, sync and async, against a real ``memory-service serve`` process."""

from __future__ import annotations

import pytest

from app.client import AsyncMemoryClient, MemoryClient, MemoryServiceError
from app.schemas import CreateEpisode, CreateSummary, EpisodeOut, SearchOut, SessionOut
from tests.support.server import ServiceProcess, service_env

API_KEY = "e2e-secret-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("client") / "memory.db"
    with ServiceProcess(service_env(path, {"MEMORY_API_KEY": API_KEY})) as process:
        yield process


def test_the_sync_client_covers_every_route(server):
    with MemoryClient(server.url, api_key=API_KEY) as memory:
        assert memory.health()["status"] in ("ok", "degraded")
        session = memory.create_session("sync-conv", {"user": "ana"})
        assert isinstance(session, SessionOut) and session.metadata == {"user": "ana"}
        assert memory.get_session(session.id) == session
        assert memory.session_by_external_id("sync-conv").id == session.id
        assert memory.update_session(session.id, {"user": "ana", "tier": 2}).metadata["tier"] == 2
        assert session.id in [s.id for s in memory.list_sessions(limit=100).items]

        first = memory.create_episode(session.id, "I moved to Lisbon last spring", "Noted: you live in Lisbon.")
        assert isinstance(first, EpisodeOut)
        batch = memory.create_episodes([
            CreateEpisode(session_id=session.id, user_message="My cat is called Miso", ai_response="Hello Miso."),
            CreateEpisode(session_id=session.id, user_message="I play the cello", ai_response="Lovely."),
        ])
        assert len(batch) == 2
        assert memory.get_episode(first.id).user_message.startswith("I moved")
        assert memory.update_episode(first.id, metadata={"edited": True}).metadata == {"edited": True}
        page = memory.session_episodes(session.id, limit=2)
        assert page.total == 3 and len(page.items) == 2
        assert [h.episode.id for h in memory.search_episodes("Lisbon", session_id=session.id).results] == [first.id]

        found = memory.search("where does the user live Lisbon", session_id=session.id, limit=5)
        assert isinstance(found, SearchOut) and first.id in [h.id for h in found.hits]
        package = memory.context("Lisbon", session.id, token_budget=2000)
        assert package.session_id == session.id
        assert any(r.default for r in memory.rankers())

        ana = memory.upsert_entity("Ana", "person", notes="the user")
        lisbon = memory.upsert_entity("Lisbon", "place")
        assert memory.upsert_entity("Ana", "person", notes="the user, a cellist").id == ana.id
        assert memory.get_entity(ana.id).notes == "the user, a cellist"
        assert [e.id for e in memory.entities_by_type("place").items] == [lisbon.id]
        assert ana.id in [e.id for e in memory.find_entities("An")]
        edge = memory.upsert_relationship(ana.id, lisbon.id, "lives_in")
        assert [r.id for r in memory.relationships(ana.id)] == [edge.id]
        assert [r.id for r in memory.relationships(lisbon.id, direction="in")] == [edge.id]
        memory.delete_relationship(ana.id, lisbon.id, "lives_in")
        assert memory.relationships(ana.id) == []

        summary = memory.create_summary(CreateSummary(session_id=session.id, content="Ana lives in Lisbon.",
                                                      episode_count=3))
        assert memory.get_summary(summary.id).content == "Ana lives in Lisbon."
        assert [s.id for s in memory.session_summaries(session.id)] == [summary.id]
        memory.delete_summary(summary.id)
        memory.delete_entity(lisbon.id)
        memory.delete_episode(batch[0].id)
        assert "memory_http_requests_total" in memory.metrics()
        memory.delete_session(session.id)
        with pytest.raises(MemoryServiceError) as missing:
            memory.get_session(session.id)
    assert (missing.value.status, missing.value.code) == (404, "not_found")


async def test_the_async_client_speaks_the_same_api(server):
    async with AsyncMemoryClient(server.url, api_key=API_KEY) as memory:
        session = await memory.create_session("async-conv")
        episode = await memory.create_episode(session.id, "I am allergic to peanuts", "I will remember that.")
        assert (await memory.get_episode(episode.id)).session_id == session.id
        assert (await memory.session_episodes(session.id)).total == 1
        hits = (await memory.search("peanuts allergy", session_id=session.id)).hits
        assert [h.id for h in hits][:1] == [episode.id]
        with pytest.raises(MemoryServiceError) as duplicate:
            await memory.create_session("async-conv")
        assert (duplicate.value.status, duplicate.value.code) == (409, "conflict")
        await memory.delete_session(session.id)


def test_errors_name_the_status_code_and_field(server):
    with MemoryClient(server.url, api_key=API_KEY) as memory:
        with pytest.raises(MemoryServiceError) as invalid:
            memory.search_episodes("x", limit=5000)
    assert invalid.value.status == 400 and invalid.value.field == "limit"


def test_a_client_without_the_key_is_refused_except_for_health(server):
    with MemoryClient(server.url) as anonymous:
        assert anonymous.health()["status"] in ("ok", "degraded")
        with pytest.raises(MemoryServiceError) as refused:
            anonymous.list_sessions()
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
