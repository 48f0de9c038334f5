"""The standalone client distribution (client/), sync and async, against a real
``memory-service serve`` process."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
import sys

import pytest

from nexusai_memory_client import (
    AsyncMemoryClient, Episode, MemoryClient, MemoryServiceError, NewEpisode, SearchResult, Session,
)
from tests.support.server import ServiceProcess, free_port, service_env

API_KEY = "e2e-secret-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("client") / "memory.db"
    with ServiceProcess(service_env(path, {"MEMORY_API_KEY": API_KEY})) as process:
        yield process


def test_the_sync_client_covers_every_route(server):
    with MemoryClient(server.url, api_key=API_KEY) as memory:
        assert memory.health()["status"] in ("ok", "degraded")
        session = memory.create_session(external_id="sync-conv", metadata={"user": "ana"})
        assert isinstance(session, Session) and session.metadata == {"user": "ana"}
        assert memory.get_session(session_id=session.id) == session
        assert memory.session_by_external_id(external_id="sync-conv").id == session.id
        assert memory.update_session(session_id=session.id, metadata={"user": "ana", "tier": 2}).metadata["tier"] == 2
        assert session.id in [s.id for s in memory.list_sessions(limit=100).items]

        first = memory.create_episode(session_id=session.id, user_message="I moved to Lisbon last spring",
                                      ai_response="Noted: you live in Lisbon.")
        assert isinstance(first, Episode)
        batch = memory.create_episodes(episodes=[
            NewEpisode(session_id=session.id, user_message="My cat is called Miso", ai_response="Hello Miso."),
            NewEpisode(session_id=session.id, user_message="I play the cello", ai_response="Lovely.",
                       metadata={"topic": "music"}),
        ])
        assert len(batch) == 2 and batch[1].metadata == {"topic": "music"}
        assert memory.get_episode(episode_id=first.id).user_message.startswith("I moved")
        assert memory.update_episode(episode_id=first.id, metadata={"edited": True}).metadata == {"edited": True}
        page = memory.session_episodes(session_id=session.id, limit=2)
        assert page.total == 3 and len(page.items) == 2
        found = memory.search_episodes(q="Lisbon", session_id=session.id)
        assert [h.episode.id for h in found.results] == [first.id]

        hits = memory.search(query="where does the user live Lisbon", session_id=session.id, limit=5)
        assert isinstance(hits, SearchResult) and first.id in [h.id for h in hits.hits]
        package = memory.context(query="Lisbon", session_id=session.id, token_budget=2000)
        assert package.session_id == session.id
        assert any(r.default for r in memory.rankers())

        ana = memory.upsert_entity(name="Ana", type="person", notes="the user")
        lisbon = memory.upsert_entity(name="Lisbon", type="place")
        assert memory.upsert_entity(name="Ana", type="person", notes="the user, a cellist").id == ana.id
        assert memory.get_entity(entity_id=ana.id).notes == "the user, a cellist"
        assert [e.id for e in memory.entities_by_type(type="place").items] == [lisbon.id]
        assert ana.id in [e.id for e in memory.find_entities(name="An")]
        edge = memory.upsert_relationship(from_id=ana.id, to_id=lisbon.id, label="lives_in")
        assert [r.id for r in memory.relationships(entity_id=ana.id)] == [edge.id]
        assert [r.id for r in memory.relationships(entity_id=lisbon.id, direction="in")] == [edge.id]
        memory.delete_relationship(from_id=ana.id, to_id=lisbon.id, label="lives_in")
        assert memory.relationships(entity_id=ana.id) == []

        summary = memory.create_summary(session_id=session.id, content="Ana lives in Lisbon.", episode_count=3,
                                        first_episode_id=first.id, last_episode_id=batch[1].id)
        assert (summary.episode_count, summary.first_episode_id) == (3, first.id)
        assert memory.get_summary(summary_id=summary.id).content == "Ana lives in Lisbon."
        assert [s.id for s in memory.session_summaries(session_id=session.id)] == [summary.id]
        memory.delete_summary(summary_id=summary.id)
        memory.delete_entity(entity_id=lisbon.id)
        memory.delete_episode(episode_id=batch[0].id)
        assert "memory_http_requests_total" in memory.metrics()
        memory.delete_session(session_id=session.id)
        with pytest.raises(MemoryServiceError) as missing:
            memory.get_session(session_id=session.id)
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    assert missing.value.body["status"] == 404 and "does not exist" in missing.value.body["message"]


async def test_the_async_client_speaks_the_same_api(server):
    async with AsyncMemoryClient(server.url, api_key=API_KEY) as memory:
        session = await memory.create_session(external_id="async-conv")
        episode = await memory.create_episode(session_id=session.id, user_message="I am allergic to peanuts",
                                              ai_response="I will remember that.")
        assert (await memory.get_episode(episode_id=episode.id)).session_id == session.id
        assert (await memory.session_episodes(session_id=session.id)).total == 1
        hits = (await memory.search(query="peanuts allergy", session_id=session.id)).hits
        assert [h.id for h in hits][:1] == [episode.id]
        summary = await memory.create_summary(session_id=session.id, content="Allergic to peanuts.")
        assert summary.episode_count == 0
        with pytest.raises(MemoryServiceError) as duplicate:
            await memory.create_session(external_id="async-conv")
        assert (duplicate.value.status, duplicate.value.code, duplicate.value.field) == (409, "conflict", "externalId")
        await memory.delete_session(session_id=session.id)


def test_methods_take_keyword_arguments_only(server):
    with MemoryClient(server.url, api_key=API_KEY) as memory, pytest.raises(TypeError):
        memory.get_session(1)  # type: ignore[misc]


def test_errors_name_the_status_code_and_field(server):
    with MemoryClient(server.url, api_key=API_KEY) as memory:
        with pytest.raises(MemoryServiceError) as invalid:
            memory.search_episodes(q="x", limit=5000)
    assert invalid.value.status == 400 and invalid.value.field == "limit"
    assert invalid.value.body["code"] == invalid.value.code


def test_a_client_without_the_key_is_refused_except_for_health(server):
    with MemoryClient(server.url) as anonymous:
        assert anonymous.health()["status"] in ("ok", "degraded")
        with pytest.raises(MemoryServiceError) as refused:
            anonymous.list_sessions()
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")


async def test_an_unreachable_service_is_the_same_error_type():
    url = f"http://127.0.0.1:{free_port()}"
    with MemoryClient(url, timeout=5) as memory, pytest.raises(MemoryServiceError) as sync_error:
        memory.rankers()
    async with AsyncMemoryClient(url, timeout=5) as memory:
        with pytest.raises(MemoryServiceError) as async_error:
            await memory.rankers()
    assert (sync_error.value.status, sync_error.value.code) == (0, "unreachable")
    assert (async_error.value.status, async_error.value.code) == (0, "unreachable")


def test_the_client_package_imports_nothing_of_the_server():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, nexusai_memory_client; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    server_side = {"app", "domain", "ports", "adapters", "litestar", "qdrant_client", "uvicorn"}
    assert sorted(m for m in loaded if m.split(".")[0] in server_side) == []
    assert "httpx" in loaded and "msgspec" in loaded


def test_the_clients_carry_owners_filters_and_forgetting(server):
    import asyncio

    with MemoryClient(server.url, api_key=API_KEY) as memory:
        mine = memory.create_session(external_id="/owned/", user_id="client-alice", agent_id="tutor")
        assert (mine.user_id, mine.agent_id) == ("client-alice", "tutor")
        assert memory.session_by_external_id(external_id="/owned/").id == mine.id
        assert [s.id for s in memory.list_sessions(user_id="client-alice").items] == [mine.id]
        memory.create_episode(session_id=mine.id, user_message="penguins in Lisbon", ai_response="ok",
                              metadata={"topic": "birds"})
        entity = memory.upsert_entity(name="Ada", type="person", user_id="client-alice")
        assert entity.user_id == "client-alice"
        hits = memory.search(query="penguins", user_id="client-alice", metadata={"topic": "birds"}, min_score=0).hits
        assert len(hits) == 1
        assert memory.search(query="penguins", user_id="client-alice", metadata={"topic": "fish"}).hits == []
        assert memory.context(query="penguins", user_id="client-alice", token_budget=500).session_id is None

    async def forget():
        async with AsyncMemoryClient(server.url, api_key=API_KEY) as memory:
            return await memory.forget_user(user_id="client-alice")

    forgotten = asyncio.run(forget())
    assert (forgotten.sessions, forgotten.episodes, forgotten.entities) == (1, 1, 1)
def _feed_end(memory) -> int:
    """The ``after`` that skips every event so far. One ``events()`` call is a page (the first
    ``limit`` events), not the end: earlier tests on this server have written more than a page."""
    after = 0
    while (page := memory.events(after=after, limit=500)).events:
        after = page.next_after
    return after


async def _async_feed_end(memory) -> int:
    after = 0
    while (page := await memory.events(after=after, limit=500)).events:
        after = page.next_after
    return after


def test_the_client_reads_history_validity_and_the_change_feed(server):
    with MemoryClient(server.url, api_key=API_KEY, actor="client-test") as memory:
        start = _feed_end(memory)
        ada = memory.upsert_entity(name="Ada (client)", type="person", notes="v1")
        memory.upsert_entity(name="Ada (client)", type="person", notes="v2")
        acme = memory.upsert_entity(name="Acme (client)", type="company")
        globex = memory.upsert_entity(name="Globex (client)", type="company")
        old = memory.upsert_relationship(from_id=ada.id, to_id=acme.id, label="works_at",
                                         valid_from=datetime(2020, 1, 1, tzinfo=UTC))
        memory.upsert_relationship(from_id=ada.id, to_id=globex.id, label="works_at", valid_from="2024-01-01T00:00:00Z",
                                   supersedes=True)
        assert [r.to_id for r in memory.relationships(entity_id=ada.id, as_of="2021-01-01T00:00:00Z")] == [acme.id]
        [closing] = memory.history(kind="relationships", record_id=old.id).items
        assert closing.changed == ["validTo"] and closing.actor == "client-test"
        [notes] = memory.history(kind="entities", record_id=ada.id).items
        assert (notes.before["notes"], notes.after["notes"]) == ("v1", "v2")
        feed = memory.events(after=start, wait=5)
        assert ("entities", ada.id, "created") in [(e.kind, e.record_id, e.op) for e in feed.events]


async def test_the_async_client_long_polls_the_feed(server):
    async with AsyncMemoryClient(server.url, api_key=API_KEY) as memory:
        start = await _async_feed_end(memory)
        session = await memory.create_session(external_id="async-feed")
        # The embedding worker appends ``embedded`` events for the previous tests' records whenever
        # it gets to them, so the session's event need not be the first after ``start``: read on
        # (each read a long poll) until it arrives.
        seen: list[tuple[str, int, str]] = []
        after = start
        while ("sessions", session.id, "created") not in seen:
            feed = await memory.events(after=after, wait=5)
            assert feed.events, f"the long poll ended with no event; seen so far: {seen}"
            seen += [(e.kind, e.record_id, e.op) for e in feed.events]
            after = feed.next_after
        assert all(op == "embedded" for (_kind, _id, op) in seen[:-1] if (_kind, _id) != ("sessions", session.id))
        assert (await memory.history(kind="episodes", record_id=10**9)).items == []
