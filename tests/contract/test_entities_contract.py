"""The ``Entities`` port (with relationships) and ``EntityWrites``, over every adapter.
"""

from __future__ import annotations

import pytest

from domain import writes
from domain.errors import NotFound
from domain.models import NewEntity, NewRelationship
from ports.store import Store
from tests.contract.store_helpers import tick


async def test_deleting_an_entity_removes_relationships_on_both_ends(store: Store) -> None:
    ada, bob, cy = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "person")))).item for n in ("Ada", "Bob", "Cy")]
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows")))
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(cy.id, bob.id, "knows")))
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(bob.id, cy.id, "mentors")))
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, cy.id, "knows")))
    assert await store.uow.run(lambda tx: writes.delete_entity(tx, bob.id)) is True
    assert await store.entities.relationships_of(bob.id, "both") == []
    left = await store.entities.relationships_of(cy.id, "both")
    assert [(r.from_id, r.to_id, r.label) for r in left] == [(ada.id, cy.id, "knows")]
    assert (await store.operations.counts())["relationships"] == 1


async def test_upserting_an_entity_creates_it_then_updates_it_in_place(store: Store) -> None:
    first = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "a mathematician", {"v": 1})))
    assert first.created is True and first.item.notes == "a mathematician"
    await tick()
    second = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", "wrote the first program", {"v": 2})))
    assert second.created is False and second.item.id == first.item.id
    assert (second.item.notes, second.item.metadata) == ("wrote the first program", {"v": 2})
    assert second.item.created_at == first.item.created_at and second.item.updated_at > first.item.updated_at
    assert await store.entities.get(first.item.id) == second.item
    assert (await store.operations.counts())["entities"] == 1


async def test_the_same_name_with_another_type_is_another_entity(store: Store) -> None:
    person = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Paris", "person")))
    city = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Paris", "city")))
    assert city.created is True and city.item.id != person.item.id
    assert await store.entities.get(999) is None


async def test_entities_by_type_are_ordered_by_name_with_total(store: Store) -> None:
    for name in ("Cy", "Ada", "Bob"):
        await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, "person")))
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Aardvark", "animal")))
    page = await store.entities.by_type("person", 2, 0)
    assert [e.name for e in page.items] == ["Ada", "Bob"] and page.total == 3
    assert [e.name for e in (await store.entities.by_type("person", 2, 2)).items] == ["Cy"]
    assert (await store.entities.by_type("robot", 10, 0)).total == 0


async def test_get_entities_follows_the_order_given_and_skips_unknown_ids(store: Store) -> None:
    a, b = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "t")))).item for n in ("A", "B")]
    assert [e.id for e in await store.entities.get_many([b.id, 999, a.id])] == [b.id, a.id]


async def test_finding_entities_by_name_is_case_insensitive_substring_exact_first(store: Store) -> None:
    for name in ("Alicia", "Malice", "alice", "Bob"):
        await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, "person")))
    found = await store.entities.find_by_name("ALICE", 10)
    assert found[0].name == "alice"
    assert sorted(e.name for e in found) == ["Malice", "alice"]
    assert [e.name for e in await store.entities.find_by_name("li", 10)][0:3] == ["Alicia", "Malice", "alice"]
    assert len(await store.entities.find_by_name("li", 1)) == 1


async def test_percent_and_underscore_in_a_name_query_are_literal(store: Store) -> None:
    for name in ("100% juice", "1000 juice", "snake_case", "snakeXcase"):
        await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, "thing")))
    assert [e.name for e in await store.entities.find_by_name("0%", 10)] == ["100% juice"]
    assert [e.name for e in await store.entities.find_by_name("e_c", 10)] == ["snake_case"]
    assert await store.entities.find_by_name("%", 10) == (await store.entities.find_by_name("100%", 10))


async def test_name_matching_folds_case_beyond_ascii(store: Store) -> None:
    zoe = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("ZOË", "person")))).item
    assert [e.id for e in await store.entities.find_by_name("zoë", 10)] == [zoe.id]
    assert [e.id for e in await store.entities.mentioned_in(["I met zoë yesterday"], 10)] == [zoe.id]


async def test_entities_mentioned_in_texts_match_whole_words_only(store: Store) -> None:
    al = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Al", "person")))).item
    alice = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Alice", "person")))).item
    ny = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("New York", "city")))).item
    assert await store.entities.mentioned_in(["Alice met Bob"], 10) == [alice]
    found = await store.entities.mentioned_in(["nothing here", "al flew to new york, then Alice left."], 10)
    assert {e.id for e in found} == {al.id, alice.id, ny.id}
    assert len(await store.entities.mentioned_in(["Al, Alice, New York"], 2)) == 2
    assert await store.entities.mentioned_in(["", "   "], 10) == []


async def test_deleting_an_entity_returns_true_then_false(store: Store) -> None:
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item
    assert await store.uow.run(lambda tx: writes.delete_entity(tx, entity.id)) is True
    assert await store.uow.run(lambda tx: writes.delete_entity(tx, entity.id)) is False
    assert await store.entities.get(entity.id) is None


async def test_upserting_a_relationship_creates_it_then_updates_its_metadata(store: Store) -> None:
    ada, bob = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "person")))).item for n in ("Ada", "Bob")]
    first = await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows", {"since": 1})))
    assert first.created is True and (first.item.from_id, first.item.to_id) == (ada.id, bob.id)
    second = await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows", {"since": 2})))
    assert second.created is False and second.item.id == first.item.id
    assert second.item.metadata == {"since": 2} and second.item.created_at == first.item.created_at
    other = await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "admires")))
    assert other.created is True and other.item.id != first.item.id


async def test_a_relationship_with_an_unknown_end_is_not_found(store: Store) -> None:
    ada = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item
    with pytest.raises(NotFound) as raised:
        await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(999, ada.id, "knows")))
    assert raised.value.field == "fromId"
    with pytest.raises(NotFound) as raised:
        await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, 999, "knows")))
    assert raised.value.field == "toId"
    assert (await store.operations.counts())["relationships"] == 0


async def test_relationships_of_an_entity_follow_the_direction_asked(store: Store) -> None:
    ada, bob, cy = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "person")))).item for n in ("Ada", "Bob", "Cy")]
    out = (await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows")))).item
    into = (await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(cy.id, ada.id, "mentors")))).item
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(bob.id, cy.id, "knows")))
    assert await store.entities.relationships_of(ada.id, "out") == [out]
    assert await store.entities.relationships_of(ada.id, "in") == [into]
    assert await store.entities.relationships_of(ada.id, "both") == [out, into]
    assert await store.entities.relationships_of(999, "both") == []


async def test_deleting_a_relationship_returns_true_then_false(store: Store) -> None:
    ada, bob = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "person")))).item for n in ("Ada", "Bob")]
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, bob.id, "knows")))
    assert await store.uow.run(lambda tx: writes.unrelate(tx, ada.id, bob.id, "likes")) is False
    assert await store.uow.run(lambda tx: writes.unrelate(tx, ada.id, bob.id, "knows")) is True
    assert await store.uow.run(lambda tx: writes.unrelate(tx, ada.id, bob.id, "knows")) is False
    assert await store.entities.get(ada.id) is not None


async def test_by_type_and_name_narrowed_to_a_user_count_only_that_users_and_the_global_entities(store: Store) -> None:
    # Narrowed in the store, not after it: another user's many entities ahead in the order can
    # neither crowd a user's out of the page nor inflate its total.
    for n in range(5):
        await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(f"Aa bob {n}", "person", user_id="bob")))
    ana = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Zed ana", "person", user_id="ana")))).item
    shared = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Zz shared", "person")))).item
    page = await store.entities.by_type("person", 2, 0, "ana")
    assert [e.id for e in page.items] == [ana.id, shared.id] and page.total == 2
    own = await store.entities.by_type("person", 2, 0, "ana", global_records=False)
    assert [e.id for e in own.items] == [ana.id] and own.total == 1
    assert (await store.entities.by_type("person", 10, 0)).total == 7
    assert [e.id for e in await store.entities.find_by_name("z", 1, "ana")] == [ana.id]
    assert [e.id for e in await store.entities.find_by_name("z", 5, "ana")] == [ana.id, shared.id]
    assert await store.entities.find_by_name("bob", 5, "ana") == []
    assert [e.id for e in await store.entities.find_by_name("z", 5, "ana", global_records=False)] == [ana.id]
