"""/relationships: upsert by (fromId, toId, label), list by direction, delete by JSON body."""

from __future__ import annotations

import pytest

from tests.api.test_errors import assert_error

RELATIONSHIP_KEYS = {"id", "fromId", "toId", "label", "metadata", "createdAt"}


@pytest.fixture
def people(client) -> dict[str, int]:
    return {name: client.post("/entities", json={"name": name, "type": "person"}).json()["id"]
            for name in ("alice", "bob", "carol")}


def relate(client, from_id: int, to_id: int, label: str = "knows", **extra):
    return client.post("/relationships", json={"fromId": from_id, "toId": to_id, "label": label, **extra})


def edges(client, entity_id: int, direction: str | None = None) -> set[tuple[int, int, str]]:
    params = {"direction": direction} if direction else {}
    response = client.get(f"/entities/{entity_id}/relationships", params=params)
    assert response.status_code == 200, response.text
    return {(r["fromId"], r["toId"], r["label"]) for r in response.json()}


def test_upserting_a_new_relationship_answers_201(client, people):
    response = relate(client, people["alice"], people["bob"], metadata={"since": 2020})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == RELATIONSHIP_KEYS
    assert (body["fromId"], body["toId"], body["label"], body["metadata"]) == (
        people["alice"], people["bob"], "knows", {"since": 2020})


def test_upserting_the_same_edge_again_answers_200_with_the_same_id(client, people):
    first = relate(client, people["alice"], people["bob"], metadata={"v": 1})
    second = relate(client, people["alice"], people["bob"], metadata={"v": 2})
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json()["id"] == first.json()["id"]
    assert second.json()["metadata"] == {"v": 2}
    assert len(client.get(f"/entities/{people['alice']}/relationships").json()) == 1


def test_another_label_or_direction_is_another_relationship(client, people):
    assert relate(client, people["alice"], people["bob"], "knows").status_code == 201
    assert relate(client, people["alice"], people["bob"], "works with").status_code == 201
    assert relate(client, people["bob"], people["alice"], "knows").status_code == 201


@pytest.mark.parametrize("end", ["fromId", "toId"])
def test_a_relationship_to_an_unknown_entity_is_a_404_naming_the_end(client, people, end):
    payload = {"fromId": people["alice"], "toId": people["bob"], "label": "knows", end: 999}
    assert_error(client.post("/relationships", json=payload), 404, end)


@pytest.mark.parametrize(("field", "value"), [
    ("fromId", "one"), ("toId", 1.5), ("fromId", 0), ("toId", -3), ("label", ""), ("label", 3),
    ("label", "x" * 513), ("metadata", [1]),
])
def test_a_bad_relationship_field_is_a_400_naming_it(client, people, field, value):
    payload = {"fromId": people["alice"], "toId": people["bob"], "label": "knows", field: value}
    assert_error(client.post("/relationships", json=payload), 400, field)


@pytest.mark.parametrize("missing", ["fromId", "toId", "label"])
def test_a_missing_relationship_field_is_a_400_naming_it(client, people, missing):
    payload = {"fromId": people["alice"], "toId": people["bob"], "label": "knows"}
    del payload[missing]
    assert_error(client.post("/relationships", json=payload), 400, missing)


def test_an_entitys_relationships_are_outgoing_by_default(client, people):
    a, b, c = people["alice"], people["bob"], people["carol"]
    relate(client, a, b)
    relate(client, c, a, "mentors")
    relate(client, b, c)
    assert edges(client, a) == {(a, b, "knows")}
    assert edges(client, a, "out") == {(a, b, "knows")}


def test_direction_in_and_both(client, people):
    a, b, c = people["alice"], people["bob"], people["carol"]
    relate(client, a, b)
    relate(client, c, a, "mentors")
    relate(client, b, c)
    assert edges(client, a, "in") == {(c, a, "mentors")}
    assert edges(client, a, "both") == {(a, b, "knows"), (c, a, "mentors")}


def test_a_self_loop_appears_once_in_both_directions(client, people):
    a = people["alice"]
    relate(client, a, a, "admires")
    response = client.get(f"/entities/{a}/relationships", params={"direction": "both"}).json()
    assert [(r["fromId"], r["toId"]) for r in response] == [(a, a)]


def test_an_entity_without_relationships_has_an_empty_list(client, people):
    assert client.get(f"/entities/{people['carol']}/relationships").json() == []


def test_relationships_of_an_unknown_entity_are_a_404(client):
    assert_error(client.get("/entities/999/relationships"), 404)


@pytest.mark.parametrize("direction", ["sideways", "OUT", ""])
def test_an_unknown_direction_is_a_400_naming_it(client, people, direction):
    assert_error(client.get(f"/entities/{people['alice']}/relationships", params={"direction": direction}), 400,
                 "direction")


def test_deleting_a_relationship_by_its_body_answers_204_then_404(client, people):
    a, b = people["alice"], people["bob"]
    relate(client, a, b)
    relate(client, a, b, "likes")
    body = {"fromId": a, "toId": b, "label": "knows"}
    response = client.request("DELETE", "/relationships", json=body)
    assert response.status_code == 204 and response.content == b""
    assert edges(client, a) == {(a, b, "likes")}
    assert_error(client.request("DELETE", "/relationships", json=body), 404)


def test_deleting_a_relationship_that_never_existed_is_a_404(client, people):
    body = {"fromId": people["bob"], "toId": people["alice"], "label": "knows"}
    assert_error(client.request("DELETE", "/relationships", json=body), 404)


def test_deleting_a_relationship_without_a_body_is_a_400(client):
    assert_error(client.request("DELETE", "/relationships"), 400)


@pytest.mark.parametrize(("payload", "field"), [
    ({"fromId": 1, "toId": 2}, "label"), ({"toId": 2, "label": "x"}, "fromId"),
    ({"fromId": "a", "toId": 2, "label": "x"}, "fromId"), ({"fromId": 1, "toId": 2**64, "label": "x"}, "toId"),
])
def test_deleting_with_a_bad_body_is_a_400_naming_the_field(client, payload, field):
    assert_error(client.request("DELETE", "/relationships", json=payload), 400, field)


def test_deleting_with_malformed_json_is_a_400(client):
    response = client.request("DELETE", "/relationships", content=b"{oops",
                              headers={"content-type": "application/json"})
    assert assert_error(response, 400)["code"] == "malformed_json"
