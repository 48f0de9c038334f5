"""Through the API: the relevance floor on /search and /context, relevance-first context
under a budget with its omissions, and read-your-writes with the ``pending`` count."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from app.main import create_app


@pytest.fixture
def client(make_settings):
    """No background worker: what gets embedded, and when, is up to the search alone. 256-d hash
    vectors, so that unrelated texts are near-orthogonal as with a real model."""
    with TestClient(create_app(make_settings(worker_enabled=False, embedding_dim=256))) as test_client:
        yield test_client


def a_session(client: TestClient) -> int:
    return client.post("/sessions", json={"externalId": "ana"}).json()["id"]


def add(client: TestClient, sid: int, user: str, ai: str = "ok", **extra) -> int:
    r = client.post("/episodes", json={"sessionId": sid, "userMessage": user, "aiResponse": ai, **extra})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def search(client: TestClient, **body) -> dict:
    r = client.post("/search", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def context(client: TestClient, **body) -> dict:
    r = client.post("/context", json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def pets(client) -> dict:
    sid = a_session(client)
    return {"session": sid,
            "kitten": add(client, sid, "We adopted a kitten: my new pet cat is called Miso", "Miso is a lovely name"),
            "nurse": add(client, sid, "I work as a nurse in Leeds", "That sounds demanding")}


def test_a_hit_below_the_relevance_floor_is_not_returned(client, pets):
    body = search(client, query="my new pet cat", sessionId=pets["session"])
    assert [h["id"] for h in body["hits"]] == [pets["kitten"]]
    assert 0.0 < body["minScore"] < 1.0 and body["hits"][0]["relevance"] >= body["minScore"]


def test_min_score_zero_returns_every_hit_with_its_relevance(client, pets):
    body = search(client, query="my new pet cat", sessionId=pets["session"], minScore=0)
    relevance = {h["id"]: h["relevance"] for h in body["hits"]}
    assert set(relevance) == {pets["kitten"], pets["nurse"]}
    assert relevance[pets["nurse"]] < relevance[pets["kitten"]] and 0.0 <= relevance[pets["nurse"]] < 0.2


def test_context_is_never_padded_with_irrelevant_episodes(client, pets):
    body = context(client, query="my new pet cat", sessionId=pets["session"], tokenBudget=1000, recentEpisodes=0)
    assert [r["episode"]["id"] for r in body["relevantEpisodes"]] == [pets["kitten"]]
    assert body["relevantEpisodes"][0]["relevance"] >= 0.2
    # The next turn comes along as the relevant turn's context, labelled as such, never as relevant.
    assert [e["id"] for e in body["neighbourEpisodes"]] == [pets["nurse"]]


def test_under_a_small_budget_context_keeps_the_answer_and_says_the_latest_turn_was_left_out(client):
    sid = a_session(client)
    answer = add(client, sid, "My sister lives in Porto", "Porto is lovely", tokenCount=10)
    latest = add(client, sid, "Anyway, the weather is grey today", "Grey again", tokenCount=10)
    body = context(client, query="Where does my sister live?", sessionId=sid, tokenBudget=12, recentEpisodes=1)
    assert [r["episode"]["id"] for r in body["relevantEpisodes"]] == [answer]
    assert body["recentEpisodes"] == [] and body["tokensUsed"] == 10
    assert {"kind": "episode", "id": latest, "tokens": 10, "role": "recent", "reason": "budget",
            "relevance": None} in body["omitted"]


def test_context_brings_a_relevant_turns_neighbours_and_keeps_everything_in_time_order(client):
    sid = a_session(client)
    question = add(client, sid, "Guess what we did on Saturday", "Tell me!", tokenCount=5)
    answer = add(client, sid, "We went sailing on the Douro river", "How exciting", tokenCount=5)
    reply = add(client, sid, "It was windy but fun", "Glad you enjoyed it", tokenCount=5)
    add(client, sid, "Unrelated: I need to buy bread", "Noted", tokenCount=5)
    body = context(client, query="sailing on the river", sessionId=sid, tokenBudget=100, recentEpisodes=0)
    assert [r["episode"]["id"] for r in body["relevantEpisodes"]] == [answer]
    assert [e["id"] for e in body["neighbourEpisodes"]] == [question, reply]
    tight = context(client, query="sailing on the river", sessionId=sid, tokenBudget=7, recentEpisodes=0)
    assert [e["id"] for e in tight["neighbourEpisodes"]] == []
    assert {(o["id"], o["role"], o["reason"]) for o in tight["omitted"]} >= {
        (question, "neighbour", "budget"), (reply, "neighbour", "budget")}


def test_a_search_embeds_its_scopes_waiting_episodes_first(client):
    sid = a_session(client)
    add(client, sid, "I am allergic to peanuts", "I will remember that")
    body = search(client, query="allergies", sessionId=sid)
    assert body["pending"] == 0
    assert [h["episode"]["userMessage"] for h in body["hits"]] == ["I am allergic to peanuts"]
    assert body["hits"][0]["vector"] is not None


def test_a_search_that_does_not_embed_first_says_how_many_records_wait(client):
    sid = a_session(client)
    add(client, sid, "I am allergic to peanuts", "I will remember that")
    add(client, sid, "My favourite colour is green", "Noted")
    other = client.post("/sessions", json={"externalId": "other"}).json()["id"]
    add(client, other, "Something else entirely", "ok")
    body = search(client, query="peanuts", sessionId=sid, readYourWrites=False)
    assert body["pending"] == 2 and all(h["vector"] is None for h in body["hits"])
    assert search(client, query="peanuts", sessionId=sid)["pending"] == 0
    assert search(client, query="peanuts", sessionId=other, readYourWrites=False)["pending"] == 1


def test_context_reports_pending_when_embedding_on_the_query_path_is_off(make_settings):
    settings = make_settings(worker_enabled=False, embedding_dim=256, read_your_writes_max=0)
    with TestClient(create_app(settings)) as client:
        sid = a_session(client)
        add(client, sid, "I am allergic to peanuts", "I will remember that")
        assert context(client, query="allergies", sessionId=sid, tokenBudget=500)["pending"] == 1
        assert search(client, query="allergies", sessionId=sid)["pending"] == 1
