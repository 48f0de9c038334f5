"""Property tests of keyword query handling over the real SQLite + FTS5 store, through the API.

Any unicode ``q`` is a 200 or a clear 400, never a 500; in the plain modes (``all``, ``any``)
FTS5 syntax typed by a user is only characters: a query made of operators, quotes and words
finds exactly the episodes containing those words, whatever the syntax around them.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from app.config import Settings
from app.main import create_app

# Words porter stemming leaves alone, including the words FTS5 reads as operators.
VOCABULARY = ("alpha", "bravo", "zulu", "and", "or", "not", "near")
CORPUS = (
    "alpha bravo", "alpha and bravo", "zulu or not", "near alpha", "not near zulu", "bravo bravo or",
    "alpha bravo zulu and or not near", "nothing here",
)
# FTS5 query syntax: quotes, grouping, prefix, initial-token, column filters, NEAR groups.
SYNTAX = ('"', "(", ")", "*", "^", ":", "-", "+", "{", "}", ",", "NEAR(", "AND", "OR", "NOT", "NEAR/2", "'", "\\")
PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                             database=None)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = tmp_path_factory.mktemp("fts") / "memory.db"
    settings_ = Settings(sqlite_path=str(path), vector_index="memory", embedder="fake", embedding_dim=16)
    with TestClient(create_app(settings_)) as test_client:
        session_id = test_client.post("/sessions", json={"externalId": "fts"}).json()["id"]
        ids = {}
        for text in CORPUS:
            episode = test_client.post("/episodes", json={"sessionId": session_id, "userMessage": text,
                                                          "aiResponse": "-"}).json()
            ids[episode["id"]] = text
        test_client.app.state.corpus = ids
        yield test_client


def _search(client, q: str, match: str):
    return client.get("/episodes/search", params={"q": q, "match": match, "limit": 100})


@PROPERTY_SETTINGS
@given(q=st.text(min_size=0, max_size=60), match=st.sampled_from(["all", "any", "fts"]))
def test_any_unicode_query_is_a_200_or_a_clear_400(client, q, match):
    response = _search(client, q, match)
    assert response.status_code in (200, 400), (q, response.text)
    if response.status_code == 400:
        body = response.json()
        assert body["code"] and body["message"] and body["status"] == 400
        assert "Traceback" not in response.text
        # In the plain modes only input no query can be built from is refused, never its syntax.
        if match != "fts":
            assert q.strip() == "" or "\x00" in q, (q, body)


def _query_pieces():
    return st.lists(st.sampled_from(VOCABULARY + SYNTAX), min_size=1, max_size=8)


@PROPERTY_SETTINGS
@given(pieces=_query_pieces(), glue=st.sampled_from([" ", "", "  "]), upper=st.booleans())
def test_plain_all_mode_finds_exactly_the_episodes_containing_every_word(client, pieces, glue, upper):
    q = glue.join(p.upper() if upper else p for p in pieces)
    words = set(re.findall(r"[a-z0-9]+", q.lower()))
    response = _search(client, q, "all")
    if not words:
        assert response.status_code in (200, 400), response.text
        if response.status_code == 200:
            assert response.json()["results"] == []
        return
    assert response.status_code == 200, (q, response.text)
    found = {hit["episode"]["id"] for hit in response.json()["results"]}
    corpus = client.app.state.corpus
    expected = {i for i, text in corpus.items() if words <= set(text.split())}
    assert found == expected, (q, words)


@PROPERTY_SETTINGS
@given(pieces=_query_pieces(), glue=st.sampled_from([" ", ""]))
def test_plain_any_mode_finds_exactly_the_episodes_containing_some_word(client, pieces, glue):
    q = glue.join(pieces)
    words = set(re.findall(r"[a-z0-9]+", q.lower()))
    response = _search(client, q, "any")
    assert response.status_code in (200, 400), response.text
    if not words:
        assert response.status_code == 400 or response.json()["results"] == []
        return
    assert response.status_code == 200, (q, response.text)
    found = {hit["episode"]["id"] for hit in response.json()["results"]}
    expected = {i for i, text in client.app.state.corpus.items() if words & set(text.split())}
    assert found == expected, (q, words)


@PROPERTY_SETTINGS
@given(pieces=_query_pieces())
def test_raw_fts_mode_answers_syntax_errors_with_a_400_naming_q(client, pieces):
    response = _search(client, " ".join(pieces), "fts")
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert response.json()["field"] == "q"


@pytest.mark.parametrize("q", ['"alpha', "alpha AND", "NEAR(alpha bravo", "alpha:bravo", "*", "(", "^alpha",
                               'alpha" OR "1"="1', "'; DROP TABLE episodes; --"])
def test_fts_syntax_in_plain_mode_is_only_text(client, q):
    response = _search(client, q, "all")
    assert response.status_code == 200, response.text
    words = set(re.findall(r"[a-z0-9]+", q.lower()))
    expected = {i for i, text in client.app.state.corpus.items() if words and words <= set(text.split())}
    assert {hit["episode"]["id"] for hit in response.json()["results"]} == expected
    # and the table is still there
    assert _search(client, "alpha", "all").status_code == 200


@PROPERTY_SETTINGS
@given(query=st.text(min_size=0, max_size=60), sources=st.lists(st.sampled_from(["episodes", "entities", "summaries"]),
                                                                 min_size=1, max_size=3, unique=True))
def test_any_unicode_hybrid_query_is_a_200_or_a_clear_400(client, query, sources):
    response = client.post("/search", json={"query": query, "sources": sources, "limit": 50})
    assert response.status_code in (200, 400), (query, response.text)
    if response.status_code == 400:
        assert query.strip() == "" or "\x00" in query, (query, response.text)
    else:
        assert response.json()["degraded"] is False
