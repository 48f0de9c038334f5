"""/episodes: create, batch, read, patch, delete, and keyword search."""

from __future__ import annotations

import pytest

from tests.api.test_errors import assert_error

EPISODE_KEYS = {"id", "sessionId", "userMessage", "aiResponse", "tokenCount", "metadata", "createdAt"}


def add(client, session_id: int, user: str, ai: str = "noted", **extra) -> dict:
    response = client.post("/episodes", json={"sessionId": session_id, "userMessage": user, "aiResponse": ai, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def search(client, **params) -> list[int]:
    response = client.get("/episodes/search", params=params)
    assert response.status_code == 200, response.text
    return [hit["episode"]["id"] for hit in response.json()["results"]]


# -- create -----------------------------------------------------------------------------------------
def test_creating_an_episode_answers_201_with_the_record(client, session_id):
    response = client.post("/episodes", json={"sessionId": session_id, "userMessage": "I like tea",
                                              "aiResponse": "Noted: tea.", "tokenCount": 7,
                                              "metadata": {"lang": "en"}})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == EPISODE_KEYS
    assert (body["sessionId"], body["userMessage"], body["aiResponse"]) == (session_id, "I like tea", "Noted: tea.")
    assert body["tokenCount"] == 7
    assert body["metadata"] == {"lang": "en"}
    assert client.get(f"/episodes/{body['id']}").json() == body


def test_token_count_and_metadata_are_optional(client, session_id):
    body = add(client, session_id, "short")
    assert body["tokenCount"] is None
    assert body["metadata"] == {}


def test_an_episode_for_an_unknown_session_is_a_404_naming_session_id(client):
    body = assert_error(client.post("/episodes", json={"sessionId": 999, "userMessage": "a", "aiResponse": "b"}),
                        404, "sessionId")
    assert "999" in body["message"]


@pytest.mark.parametrize("missing", ["sessionId", "userMessage", "aiResponse"])
def test_a_missing_required_field_is_a_400_naming_it(client, session_id, missing):
    payload = {"sessionId": session_id, "userMessage": "a", "aiResponse": "b"}
    del payload[missing]
    assert_error(client.post("/episodes", json=payload), 400, missing)


@pytest.mark.parametrize(("field", "value"), [
    ("sessionId", "abc"), ("sessionId", 1.5), ("sessionId", True), ("sessionId", None), ("userMessage", 5),
    ("aiResponse", ["x"]), ("tokenCount", "many"), ("tokenCount", -1), ("createdAt", "yesterday"),
])
def test_a_field_of_the_wrong_type_is_a_400_naming_it(client, session_id, field, value):
    payload = {"sessionId": session_id, "userMessage": "a", "aiResponse": "b", field: value}
    assert_error(client.post("/episodes", json=payload), 400, field)


@pytest.mark.parametrize("metadata", [[1], "x", 1, None])
def test_metadata_that_is_not_an_object_is_a_400(client, session_id, metadata):
    payload = {"sessionId": session_id, "userMessage": "a", "aiResponse": "b", "metadata": metadata}
    assert_error(client.post("/episodes", json=payload), 400, "metadata")


@pytest.mark.parametrize("field", ["userMessage", "aiResponse"])
def test_a_nul_byte_in_the_text_is_a_400_naming_the_field(client, session_id, field):
    payload = {"sessionId": session_id, "userMessage": "a", "aiResponse": "b", field: "be\u0000fore"}
    assert_error(client.post("/episodes", json=payload), 400, field)


def test_an_episode_with_both_texts_empty_is_a_400(client, session_id):
    assert_error(client.post("/episodes", json={"sessionId": session_id, "userMessage": " ", "aiResponse": ""}), 400)


def test_an_episode_with_one_empty_side_is_accepted(client, session_id):
    assert add(client, session_id, "", "the assistant spoke first")["userMessage"] == ""


def test_text_over_the_length_limit_is_a_400_naming_the_field(client, session_id):
    payload = {"sessionId": session_id, "userMessage": "x" * 100_001, "aiResponse": "b"}
    assert_error(client.post("/episodes", json=payload), 400, "userMessage")


def test_unicode_and_emoji_survive_the_round_trip(client, session_id):
    body = add(client, session_id, "Grüße aus Köln 🎉", "日本語もOK")
    assert client.get(f"/episodes/{body['id']}").json()["userMessage"] == "Grüße aus Köln 🎉"


# -- read and delete --------------------------------------------------------------------------------
def test_an_unknown_episode_is_a_404(client):
    assert_error(client.get("/episodes/12345"), 404)


def test_deleting_an_episode_answers_204_then_404_and_drops_it_from_search(client, session_id):
    episode = add(client, session_id, "ephemeral words")
    assert search(client, q="ephemeral") == [episode["id"]]
    response = client.delete(f"/episodes/{episode['id']}")
    assert response.status_code == 204 and response.content == b""
    assert_error(client.get(f"/episodes/{episode['id']}"), 404)
    assert_error(client.delete(f"/episodes/{episode['id']}"), 404)
    assert search(client, q="ephemeral") == []
    assert client.get(f"/sessions/{session_id}/episodes").json()["total"] == 0


# -- patch ------------------------------------------------------------------------------------------
def test_patching_the_text_re_indexes_it_for_search(client, session_id):
    episode = add(client, session_id, "I adore marmalade", "marmalade it is")
    assert search(client, q="marmalade") == [episode["id"]]
    response = client.patch(f"/episodes/{episode['id']}", json={"userMessage": "I adore pistachio",
                                                                "aiResponse": "pistachio it is"})
    assert response.status_code == 200
    assert response.json()["userMessage"] == "I adore pistachio"
    assert search(client, q="marmalade") == []
    assert search(client, q="pistachio") == [episode["id"]]


def test_patching_one_side_keeps_the_other(client, session_id):
    episode = add(client, session_id, "question about kites", "answer about kites", tokenCount=4,
                  metadata={"k": 1})
    body = client.patch(f"/episodes/{episode['id']}", json={"aiResponse": "answer about gliders"}).json()
    assert body["userMessage"] == "question about kites"
    assert body["aiResponse"] == "answer about gliders"
    assert (body["tokenCount"], body["metadata"], body["createdAt"]) == (4, {"k": 1}, episode["createdAt"])
    assert search(client, q="gliders") == [episode["id"]]
    assert search(client, q="kites") == [episode["id"]]


def test_patching_metadata_and_token_count(client, session_id):
    episode = add(client, session_id, "meta")
    body = client.patch(f"/episodes/{episode['id']}", json={"metadata": {"tag": "x"}, "tokenCount": 9}).json()
    assert (body["metadata"], body["tokenCount"]) == ({"tag": "x"}, 9)


def test_patching_an_unknown_episode_is_a_404(client):
    assert_error(client.patch("/episodes/999", json={"userMessage": "x"}), 404)


@pytest.mark.parametrize(("payload", "field"), [
    ({"userMessage": 3}, "userMessage"), ({"tokenCount": -2}, "tokenCount"), ({"metadata": []}, "metadata"),
    ({"aiResponse": "nul\u0000"}, "aiResponse"),
])
def test_patching_with_a_bad_field_is_a_400_naming_it(client, session_id, payload, field):
    episode = add(client, session_id, "target")
    assert_error(client.patch(f"/episodes/{episode['id']}", json=payload), 400, field)


# -- batch ------------------------------------------------------------------------------------------
def test_a_batch_is_stored_in_order_and_answers_201(client, session_id):
    items = [{"sessionId": session_id, "userMessage": f"bulk {i}", "aiResponse": "ok"} for i in range(5)]
    response = client.post("/episodes/batch", json={"episodes": items})
    assert response.status_code == 201
    body = response.json()
    assert [e["userMessage"] for e in body] == [f"bulk {i}" for i in range(5)]
    assert [e["id"] for e in body] == sorted(e["id"] for e in body)
    assert client.get(f"/sessions/{session_id}/episodes").json()["total"] == 5
    assert len(search(client, q="bulk")) == 5


def test_a_batch_naming_an_unknown_session_stores_nothing(client, session_id):
    items = [{"sessionId": session_id, "userMessage": "first", "aiResponse": "ok"},
             {"sessionId": 999, "userMessage": "second", "aiResponse": "ok"},
             {"sessionId": session_id, "userMessage": "third", "aiResponse": "ok"}]
    assert_error(client.post("/episodes/batch", json={"episodes": items}), 404, "sessionId")
    assert client.get(f"/sessions/{session_id}/episodes").json()["total"] == 0
    assert search(client, q="first") == []


def test_a_batch_with_one_invalid_episode_stores_nothing(client, session_id):
    items = [{"sessionId": session_id, "userMessage": "fine", "aiResponse": "ok"},
             {"sessionId": session_id, "userMessage": "bad\u0000", "aiResponse": "ok"}]
    assert_error(client.post("/episodes/batch", json={"episodes": items}), 400, "userMessage")
    assert client.get(f"/sessions/{session_id}/episodes").json()["total"] == 0


@pytest.mark.parametrize("episodes", [[], "all", None, [1]])
def test_a_batch_that_is_empty_or_not_a_list_of_episodes_is_a_400(client, episodes):
    assert_error(client.post("/episodes/batch", json={"episodes": episodes}), 400)


def test_a_batch_over_one_thousand_episodes_is_a_400(client, session_id):
    items = [{"sessionId": session_id, "userMessage": "x", "aiResponse": "y"}] * 1001
    assert_error(client.post("/episodes/batch", json={"episodes": items}), 400, "episodes")


def test_batch_is_not_captured_by_the_id_route(client, session_id):
    assert_error(client.get("/episodes/batch"), 405)


# -- search -----------------------------------------------------------------------------------------
@pytest.fixture
def corpus(client, session_id) -> dict[str, int]:
    other = client.post("/sessions", json={"externalId": "conv-2"}).json()["id"]
    return {
        "trip": add(client, session_id, "We planned a trip to Lisbon", "Lisbon in spring is lovely")["id"],
        "food": add(client, session_id, "My favourite food is ramen", "Ramen noted")["id"],
        "both": add(client, session_id, "Ramen on the Lisbon trip?", "There is ramen in Lisbon")["id"],
        "quote": add(client, session_id, 'She said "unbalanced" twice', "odd")["id"],
        "elsewhere": add(client, other, "Lisbon again from another chat", "yes")["id"],
        "other_session": other,
    }


def test_search_answers_with_the_query_the_mode_and_scored_results(client, corpus):
    response = client.get("/episodes/search", params={"q": "ramen"})
    assert response.status_code == 200
    body = response.json()
    assert (body["query"], body["match"]) == ("ramen", "all")
    assert {hit["episode"]["id"] for hit in body["results"]} == {corpus["food"], corpus["both"]}
    assert all(isinstance(hit["score"], float) and set(hit["episode"]) == EPISODE_KEYS for hit in body["results"])


def test_search_is_not_captured_by_the_id_route(client, corpus):
    assert "results" in client.get("/episodes/search", params={"q": "ramen"}).json()


def test_plain_search_requires_every_word_by_default(client, corpus):
    assert search(client, q="ramen lisbon") == [corpus["both"]]
    assert search(client, q="ramen lisbon", match="all") == [corpus["both"]]


def test_match_any_finds_episodes_with_at_least_one_word(client, corpus):
    found = set(search(client, q="ramen lisbon", match="any"))
    assert found == {corpus["trip"], corpus["food"], corpus["both"], corpus["elsewhere"]}


def test_search_orders_by_bm25_best_first(client, session_id):
    once = add(client, session_id, "we talked about many things and oolong came up once among them", "fine")
    often = add(client, session_id, "oolong oolong", "more oolong")
    body = client.get("/episodes/search", params={"q": "oolong"}).json()
    assert [hit["episode"]["id"] for hit in body["results"]] == [often["id"], once["id"]]
    assert body["results"][0]["score"] > body["results"][1]["score"]


def test_search_is_case_insensitive(client, corpus):
    assert search(client, q="LISBON TRIP") == search(client, q="lisbon trip")


def test_the_session_filter_keeps_one_sessions_episodes(client, corpus, session_id):
    everywhere = set(search(client, q="lisbon"))
    assert corpus["elsewhere"] in everywhere
    assert set(search(client, q="lisbon", sessionId=session_id)) == everywhere - {corpus["elsewhere"]}
    assert search(client, q="lisbon", sessionId=corpus["other_session"]) == [corpus["elsewhere"]]
    assert search(client, q="lisbon", sessionId=999) == []


def test_search_returns_at_most_limit_hits(client, corpus):
    assert len(search(client, q="lisbon", limit=2)) == 2
    assert len(search(client, q="lisbon", limit=1)) == 1


def test_a_query_with_an_unbalanced_quote_is_plain_text(client, corpus):
    assert search(client, q='"unbalanced') == [corpus["quote"]]


@pytest.mark.parametrize("q", ["a AND OR NOT (", 'ramen"', "NEAR(ramen", "ramen*", "-ramen", "^ramen", "ramen:",
                               "col:ramen", "{ramen}", "'; DROP TABLE episodes; --", "((()))", "AND", "*"])
def test_operators_and_punctuation_in_a_plain_query_are_just_characters(client, corpus, q):
    response = client.get("/episodes/search", params={"q": q})
    assert response.status_code == 200, response.text
    for mode in ("all", "any"):
        assert client.get("/episodes/search", params={"q": q, "match": mode}).status_code == 200
    assert client.get(f"/episodes/{corpus['food']}").status_code == 200


def test_words_are_matched_whole_after_punctuation_is_dropped(client, corpus):
    assert search(client, q="ramen?!") == search(client, q="ramen")
    assert search(client, q="NEAR(ramen") == []  # "near" and "ramen" both required; no episode has "near"


def test_match_fts_passes_fts5_syntax_through(client, corpus):
    assert set(search(client, q="ramen NOT lisbon", match="fts")) == {corpus["food"]}
    assert set(search(client, q='"trip to lisbon"', match="fts")) == {corpus["trip"]}
    assert set(search(client, q="rame*", match="fts")) == {corpus["food"], corpus["both"]}


@pytest.mark.parametrize("q", ["a AND OR NOT (", '"unbalanced', "ramen AND", "NEAR(ramen", "(ramen"])
def test_match_fts_with_bad_syntax_is_a_400_naming_the_problem_and_q(client, corpus, q):
    body = assert_error(client.get("/episodes/search", params={"q": q, "match": "fts"}), 400, "q")
    assert "FTS5" in body["message"] or "fts5" in body["message"]


def test_a_query_matching_nothing_is_an_empty_list(client, corpus):
    assert search(client, q="zeppelin") == []


def test_search_without_q_is_a_400_naming_q(client):
    assert_error(client.get("/episodes/search"), 400, "q")


@pytest.mark.parametrize(("params", "field"), [
    ({"q": "x", "limit": -1}, "limit"), ({"q": "x", "limit": 0}, "limit"), ({"q": "x", "limit": 1001}, "limit"),
    ({"q": "x", "match": "some"}, "match"), ({"q": "x", "sessionId": "abc"}, "sessionId"), ({"q": ""}, "q"),
])
def test_bad_search_parameters_are_a_400_naming_the_parameter(client, params, field):
    assert_error(client.get("/episodes/search", params=params), 400, field)


def test_a_query_of_only_punctuation_finds_nothing_but_is_fine(client, corpus):
    assert search(client, q="?!.,;") == []


def test_new_episodes_are_searchable_at_once(client, session_id):
    episode = add(client, session_id, "instantaneous kaleidoscope")
    assert search(client, q="kaleidoscope") == [episode["id"]]
