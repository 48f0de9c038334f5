"""/entities: upsert by (name, type), read, list by type, search by name, delete with cascade."""

from __future__ import annotations

import pytest

from tests.api.test_errors import assert_error

ENTITY_KEYS = {"id", "name", "type", "notes", "metadata", "createdAt", "updatedAt"}


def upsert(client, name: str, type_: str = "person", **extra) -> dict:
    response = client.post("/entities", json={"name": name, "type": type_, **extra})
    assert response.status_code in (200, 201), response.text
    return response.json()


def test_upserting_a_new_entity_answers_201(client):
    response = client.post("/entities", json={"name": "Alice", "type": "person", "notes": "likes tea",
                                              "metadata": {"age": 30}})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == ENTITY_KEYS
    assert (body["name"], body["type"], body["notes"], body["metadata"]) == ("Alice", "person", "likes tea",
                                                                             {"age": 30})


def test_upserting_the_same_name_and_type_again_answers_200_and_updates_it(client):
    first = client.post("/entities", json={"name": "Alice", "type": "person", "notes": "likes tea"})
    second = client.post("/entities", json={"name": "Alice", "type": "person", "notes": "prefers coffee",
                                            "metadata": {"v": 2}})
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json()["id"] == first.json()["id"]
    assert (second.json()["notes"], second.json()["metadata"]) == ("prefers coffee", {"v": 2})
    assert second.json()["createdAt"] == first.json()["createdAt"]
    assert second.json()["updatedAt"] >= first.json()["updatedAt"]
    assert client.get(f"/entities/{first.json()['id']}").json()["notes"] == "prefers coffee"


def test_the_same_name_with_another_type_is_another_entity(client):
    person = client.post("/entities", json={"name": "Jordan", "type": "person"})
    country = client.post("/entities", json={"name": "Jordan", "type": "country"})
    assert (person.status_code, country.status_code) == (201, 201)
    assert person.json()["id"] != country.json()["id"]


def test_notes_are_optional(client):
    assert upsert(client, "Nobody")["notes"] is None


@pytest.mark.parametrize("missing", ["name", "type"])
def test_a_missing_name_or_type_is_a_400_naming_it(client, missing):
    payload = {"name": "Alice", "type": "person"}
    del payload[missing]
    assert_error(client.post("/entities", json=payload), 400, missing)


@pytest.mark.parametrize(("field", "value"), [
    ("name", ""), ("name", "   "), ("name", 7), ("name", "a\u0000"), ("type", ""), ("type", ["person"]),
    ("type", "x" * 513), ("notes", 5), ("notes", "nul\u0000"), ("metadata", [1]), ("metadata", "{}"),
])
def test_a_bad_entity_field_is_a_400_naming_it(client, field, value):
    payload = {"name": "Alice", "type": "person", field: value}
    assert_error(client.post("/entities", json=payload), 400, field)


def test_an_unknown_entity_is_a_404(client):
    assert_error(client.get("/entities/999"), 404)


def test_deleting_an_entity_answers_204_then_404(client):
    entity = upsert(client, "Temp")
    response = client.delete(f"/entities/{entity['id']}")
    assert response.status_code == 204 and response.content == b""
    assert_error(client.get(f"/entities/{entity['id']}"), 404)
    assert_error(client.delete(f"/entities/{entity['id']}"), 404)


def test_deleting_an_entity_removes_its_relationships_on_both_ends(client):
    alice, bob, carol = upsert(client, "Alice"), upsert(client, "Bob"), upsert(client, "Carol")
    for source, target in ((alice, bob), (bob, carol), (carol, alice)):
        client.post("/relationships", json={"fromId": source["id"], "toId": target["id"], "label": "knows"})
    assert client.delete(f"/entities/{bob['id']}").status_code == 204
    assert client.get(f"/entities/{alice['id']}/relationships", params={"direction": "both"}).json() == [
        client.get(f"/entities/{carol['id']}/relationships").json()[0]
    ]
    remaining = client.get(f"/entities/{carol['id']}/relationships", params={"direction": "both"}).json()
    assert [(r["fromId"], r["toId"]) for r in remaining] == [(carol["id"], alice["id"])]


def test_by_type_lists_only_that_type_with_the_total(client):
    for name in ("Alice", "Bob", "Carol"):
        upsert(client, name, "person")
    upsert(client, "Lisbon", "place")
    response = client.get("/entities/by-type/person")
    assert response.status_code == 200
    page = response.json()
    assert page["total"] == 3
    assert sorted(e["name"] for e in page["items"]) == ["Alice", "Bob", "Carol"]
    assert {e["type"] for e in page["items"]} == {"person"}


def test_by_type_is_paginated(client):
    made = [upsert(client, f"P{i}", "person")["id"] for i in range(5)]
    first = client.get("/entities/by-type/person", params={"limit": 2}).json()
    rest = client.get("/entities/by-type/person", params={"limit": 10, "offset": 2}).json()
    assert (first["total"], first["limit"], first["offset"], len(first["items"])) == (5, 2, 0, 2)
    assert sorted(e["id"] for e in first["items"] + rest["items"]) == made


def test_by_type_of_an_unknown_type_is_an_empty_page(client):
    assert client.get("/entities/by-type/dragon").json()["items"] == []


def test_by_type_is_not_captured_by_the_id_route(client):
    upsert(client, "Alice", "person")
    assert client.get("/entities/by-type/person").json()["total"] == 1


def test_a_type_with_spaces_and_unicode_is_listed(client):
    upsert(client, "Sagrada Família", "lugar famoso")
    assert [e["name"] for e in client.get("/entities/by-type/lugar famoso").json()["items"]] == ["Sagrada Família"]


@pytest.mark.parametrize(("params", "field"), [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"),
                                               ({"offset": -1}, "offset")])
def test_by_type_with_a_bad_page_is_a_400(client, params, field):
    assert_error(client.get("/entities/by-type/person", params=params), 400, field)


def test_search_by_name_finds_entities_whose_name_contains_the_text(client):
    alice, alicia = upsert(client, "Alice"), upsert(client, "Alicia Keys")
    upsert(client, "Bob")
    response = client.get("/entities/search", params={"name": "ali"})
    assert response.status_code == 200
    assert {e["id"] for e in response.json()} == {alice["id"], alicia["id"]}


def test_search_by_name_puts_an_exact_match_first(client):
    upsert(client, "Annabel")
    exact = upsert(client, "Ann")
    assert client.get("/entities/search", params={"name": "ann"}).json()[0]["id"] == exact["id"]


def test_search_by_name_treats_like_wildcards_literally(client):
    upsert(client, "Alice")
    percent = upsert(client, "100% Cotton", "brand")
    assert [e["id"] for e in client.get("/entities/search", params={"name": "%"}).json()] == [percent["id"]]
    assert client.get("/entities/search", params={"name": "_"}).json() == []


def test_search_by_name_respects_the_limit(client):
    for i in range(5):
        upsert(client, f"Sam {i}")
    assert len(client.get("/entities/search", params={"name": "sam", "limit": 3}).json()) == 3


def test_search_by_name_is_not_captured_by_the_id_route(client):
    assert client.get("/entities/search", params={"name": "nobody"}).json() == []


@pytest.mark.parametrize("params", [{}, {"name": ""}, {"name": "x", "limit": 0}])
def test_search_by_name_without_a_name_or_with_a_bad_limit_is_a_400(client, params):
    assert_error(client.get("/entities/search", params=params), 400)
