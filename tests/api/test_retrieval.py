"""POST /search, POST /context and GET /rankers through the API, with the fake embedder."""

from __future__ import annotations

import time

import pytest
from litestar.testing import TestClient

from app.main import create_app
from tests.support.process import backlog_pending, fresh_health


def drained(client: TestClient, timeout: float = 20.0) -> None:
    fresh_health(client, lambda body: backlog_pending(body) == 0, timeout)


def add(client: TestClient, sid: int, user: str, ai: str = "ok", **extra) -> int:
    r = client.post("/episodes", json={"sessionId": sid, "userMessage": user, "aiResponse": ai, **extra})
    assert r.status_code == 201, r.text
    return r.json()["id"]


@pytest.fixture
def memories(client, session_id):
    ids = {
        "cat": add(client, session_id, "My cat Tom loves tuna", "Tom sounds adorable"),
        "hike": add(client, session_id, "We hiked in the Alps last summer", "The Alps are beautiful"),
        "job": add(client, session_id, "I started a new job as a nurse", "Congratulations on the job"),
    }
    drained(client)
    return ids


def test_search_fuses_both_legs_and_explains_each_hit(client, session_id, memories):
    body = client.post("/search", json={"query": "cat Tom tuna", "sessionId": session_id, "limit": 3}).json()
    assert body["ranker"] == "conversation" and body["degraded"] is False and body["warnings"] == []
    top = body["hits"][0]
    assert top["source"] == "episodes" and top["id"] == memories["cat"]
    assert top["episode"]["userMessage"] == "My cat Tom loves tuna"
    assert top["keyword"]["rank"] == 1 and top["vector"]["rank"] == 1
    assert top["score"] > 0
    assert len(body["hits"]) <= 3


def test_search_is_scoped_to_the_session(client, session_id, memories):
    other = client.post("/sessions", json={"externalId": "other"}).json()["id"]
    add(client, other, "My cat Tom loves tuna too")
    drained(client)
    body = client.post("/search", json={"query": "cat tuna", "sessionId": other}).json()
    assert {h["episode"]["sessionId"] for h in body["hits"]} == {other}


def test_search_with_an_unknown_session_is_a_404(client):
    r = client.post("/search", json={"query": "x", "sessionId": 999})
    assert r.status_code == 404 and r.json()["field"] == "sessionId"


def test_each_ranker_can_be_chosen_per_request(client, session_id, memories):
    for name in ("conversation", "rrf", "vector", "keyword", "weighted", "recency", "mmr"):
        body = client.post("/search", json={"query": "Alps hiking", "sessionId": session_id, "ranker": name}).json()
        assert body["ranker"] == name
        assert body["hits"], name


def test_the_keyword_ranker_returns_only_keyword_matches(client, session_id, memories):
    body = client.post("/search", json={"query": "nurse", "sessionId": session_id, "ranker": "keyword"}).json()
    assert [h["id"] for h in body["hits"]] == [memories["job"]]


def test_an_unknown_ranker_is_a_400_naming_the_known_ones(client):
    r = client.post("/search", json={"query": "x", "ranker": "nope"})
    assert r.status_code == 400
    assert r.json()["field"] == "ranker" and "rrf" in r.json()["message"]


def test_search_over_entities_and_summaries_when_sources_ask(client, session_id, memories):
    entity = client.post("/entities", json={"name": "Tom", "type": "cat", "notes": "loves tuna"}).json()["id"]
    summary = client.post("/summaries", json={"sessionId": session_id, "content": "The user has a cat that loves tuna"})
    drained(client)
    body = client.post("/search", json={"query": "tuna", "sessionId": session_id,
                                         "sources": ["episodes", "entities", "summaries"]}).json()
    found = {(h["source"], h["id"]) for h in body["hits"]}
    assert ("entities", entity) in found and ("summaries", summary.json()["id"]) in found
    assert ("episodes", memories["cat"]) in found
    field = {"episodes": "episode", "entities": "entity", "summaries": "summary"}
    for hit in body["hits"]:
        assert hit[field[hit["source"]]]["id"] == hit["id"]


def test_since_and_until_filter_both_legs(client, session_id):
    old = add(client, session_id, "tuna in the old days", createdAt="2020-01-01T00:00:00Z")
    new = add(client, session_id, "tuna nowadays", createdAt="2026-01-01T00:00:00Z")
    drained(client)
    body = client.post("/search", json={"query": "tuna", "sessionId": session_id,
                                         "since": "2025-01-01T00:00:00Z"}).json()
    assert [h["id"] for h in body["hits"]] == [new]
    body = client.post("/search", json={"query": "tuna", "until": "2021-01-01T00:00:00Z"}).json()
    assert [h["id"] for h in body["hits"]] == [old]


def test_bad_search_bodies_are_400s(client):
    assert client.post("/search", json={"query": ""}).status_code == 400
    assert client.post("/search", json={"query": "x", "limit": 0}).status_code == 400
    assert client.post("/search", json={"query": "x", "sources": ["nope"]}).status_code == 400
    r = client.post("/search", json={"query": "x", "since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"})
    assert r.status_code == 400 and r.json()["field"] == "since"


def test_search_degrades_to_keyword_results_when_the_embedder_is_down(client, session_id, memories):
    client.app.state.container.embedder().go_down()
    body = client.post("/search", json={"query": "Alps", "sessionId": session_id}).json()
    assert body["degraded"] is True
    assert "embedder" in body["warnings"][0]
    # The keyword leg alone found the hike; what else comes back is its conversation context.
    assert [h["id"] for h in body["hits"] if h["keyword"]] == [memories["hike"]]
    assert body["hits"][0]["id"] == memories["hike"] and body["hits"][0]["keyword"]["rank"] == 1
    assert all(h["vector"] is None for h in body["hits"])


def test_writes_still_answer_201_while_the_embedder_is_down_and_drain_after(client, session_id):
    container = client.app.state.container
    container.embedder().go_down()
    for i in range(3):
        add(client, session_id, f"remember item {i}")
    assert len(client.get("/episodes/search", params={"q": "remember"}).json()["results"]) == 3
    time.sleep(0.3)  # let the worker try and fail at least once
    health = fresh_health(client, lambda body: backlog_pending(body) == 3)
    assert health["status"] == "degraded"
    assert health["components"]["embedder"]["reachable"] is False
    assert health["components"]["embeddingBacklog"]["pending"] == 3
    container.embedder().recover()
    drained(client)  # the first retries come within a few seconds of backoff
    import asyncio  # the in-memory index answers on any loop; count its points once

    assert asyncio.run(_count(container)) == 3


async def _count(container) -> int:
    return await container.index_manager().count("episodes")


def test_context_package_holds_recent_relevant_and_entities_within_budget(client, session_id, memories):
    tom = client.post("/entities", json={"name": "Tom", "type": "cat"}).json()["id"]
    alps = client.post("/entities", json={"name": "Alps", "type": "place"}).json()["id"]
    client.post("/relationships", json={"fromId": tom, "toId": alps, "label": "visited"})
    for i in range(5):
        add(client, session_id, f"small talk number {i}")
    drained(client)
    body = client.post("/context", json={"query": "What is my cat called?", "sessionId": session_id,
                                          "tokenBudget": 1000, "recentEpisodes": 2}).json()
    assert [e["userMessage"] for e in body["recentEpisodes"]] == ["small talk number 3", "small talk number 4"]
    assert memories["cat"] in [r["episode"]["id"] for r in body["relevantEpisodes"]]
    recent_ids = {e["id"] for e in body["recentEpisodes"]}
    assert not recent_ids & {r["episode"]["id"] for r in body["relevantEpisodes"]}
    assert "Tom" in [e["name"] for e in body["entities"]]
    assert any(r["label"] == "visited" for r in body["relationships"])
    assert body["tokensUsed"] <= body["tokenBudget"]


def test_context_reports_what_the_budget_left_out(client, session_id, memories):
    body = client.post("/context", json={"query": "cat", "sessionId": session_id, "tokenBudget": 15,
                                          "recentEpisodes": 3}).json()
    assert body["tokensUsed"] <= 15
    assert body["omitted"], body
    assert {o["kind"] for o in body["omitted"]} <= {"episode", "summary", "entity", "relationship"}


def test_context_counts_tokens_with_token_count_where_given(client, session_id):
    add(client, session_id, "a" * 400, tokenCount=3)
    drained(client)
    body = client.post("/context", json={"query": "zzz", "sessionId": session_id, "tokenBudget": 3,
                                          "recentEpisodes": 1}).json()
    assert len(body["recentEpisodes"]) == 1 and body["tokensUsed"] == 3


def test_context_for_an_unknown_session_is_a_404(client):
    r = client.post("/context", json={"query": "x", "sessionId": 12345, "tokenBudget": 100})
    assert r.status_code == 404


def test_rankers_lists_every_built_in_with_its_plugin_and_the_default(client):
    rankers = client.get("/rankers").json()
    assert [r["name"] for r in rankers][:7] == ["conversation", "rrf", "vector", "keyword", "weighted", "recency", "mmr"]
    assert {r["plugin"] for r in rankers} == {"builtin"}
    assert [r["name"] for r in rankers if r["default"]] == ["conversation"]


def test_the_example_plugin_is_selectable_per_request_and_by_default(installed_example, make_settings):
    with TestClient(create_app(make_settings())) as client:
        listed = {r["name"]: r for r in client.get("/rankers").json()}
        assert listed["keyword-first"]["plugin"] == "keyword_first"
        sid = client.post("/sessions", json={"externalId": "p"}).json()["id"]
        add(client, sid, "banana bread recipe")
        drained(client)
        body = client.post("/search", json={"query": "banana", "ranker": "keyword-first"}).json()
        assert body["ranker"] == "keyword-first" and body["hits"][0]["episode"]["userMessage"] == "banana bread recipe"
    with TestClient(create_app(make_settings(default_ranker="keyword-first"))) as client:
        assert [r["name"] for r in client.get("/rankers").json() if r["default"]] == ["keyword-first"]


def test_an_unknown_default_ranker_stops_start_up_naming_the_setting(make_settings):
    from app.config import ConfigError

    with pytest.raises(ConfigError, match="DEFAULT_RANKER"):
        create_app(make_settings(default_ranker="nope"))
