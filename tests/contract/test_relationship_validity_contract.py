"""Relationships valid in time over every store adapter: validFrom/validTo, asOf, supersedes,
one open edge per (fromId, toId, label) and the seed's behaviour when none of it is used."""

from __future__ import annotations

import pytest

from domain import writes
from domain.errors import Conflict, Invalid
from domain.listing import ListQuery
from domain.models import NewEntity, NewRelationship
from ports.store import Store

Y2020, Y2021, Y2022, Y2023 = (f"{y}-01-01T00:00:00.000Z" for y in (2020, 2021, 2022, 2023))


async def entities(store: Store, *names: str) -> list[int]:
    return [(await store.uow.run(lambda tx, n=n: writes.upsert_entity(tx, NewEntity(n, "x")))).item.id for n in names]


async def relate(store: Store, new: NewRelationship):
    return await store.uow.run(lambda tx: writes.relate(tx, new))


async def test_without_validity_an_edge_is_unique_by_its_triple_as_before(store: Store) -> None:
    a, b = await entities(store, "A", "B")
    first = await relate(store, NewRelationship(a, b, "knows", {"v": 1}))
    again = await relate(store, NewRelationship(a, b, "knows", {"v": 2}))
    assert first.created and not again.created and again.item.id == first.item.id
    assert again.before.metadata == {"v": 1} and again.item.metadata == {"v": 2}
    assert (again.item.valid_from, again.item.valid_to) == (None, None)
    assert [r.id for r in await store.entities.relationships_of(a, "out")] == [first.item.id]


async def test_as_of_returns_the_edges_valid_then(store: Store) -> None:
    ada, acme, globex = await entities(store, "Ada", "Acme", "Globex")
    old = (await relate(store, NewRelationship(ada, acme, "works_at", valid_from=Y2020, valid_to=Y2022))).item
    new = (await relate(store, NewRelationship(ada, globex, "works_at", valid_from=Y2022))).item
    assert [r.id for r in await store.entities.relationships_of(ada, "out", Y2021)] == [old.id]
    assert [r.id for r in await store.entities.relationships_of(ada, "out", Y2022)] == [new.id]  # to is exclusive
    assert [r.id for r in await store.entities.relationships_of(ada, "out", "2019-06-01T00:00:00.000Z")] == []
    assert {r.id for r in await store.entities.relationships_of(ada, "out")} == {old.id, new.id}



async def test_the_relationship_list_as_of_a_moment_keeps_the_edges_valid_then(store: Store) -> None:
    # The same rule as relationships_of, on the keyset list (GET /relationships?asOf=).
    ada, acme, globex = await entities(store, "Ada", "Acme", "Globex")
    old = (await relate(store, NewRelationship(ada, acme, "works_at", valid_from=Y2020, valid_to=Y2022))).item
    new = (await relate(store, NewRelationship(ada, globex, "works_at", valid_from=Y2022))).item

    async def listed(**fields) -> list[int]:
        return [r.id for r in (await store.listing.relationships(ListQuery(limit=10, **fields))).items]

    assert await listed(as_of=Y2021) == [old.id]
    assert await listed(as_of=Y2022, entity_id=ada) == [new.id]  # validTo is exclusive
    assert await listed(as_of="2019-06-01T00:00:00.000Z") == []
    assert await listed() == [old.id, new.id]


async def test_supersedes_closes_the_open_edge_of_the_same_from_and_label(store: Store) -> None:
    ada, acme, globex, bob = await entities(store, "Ada", "Acme", "Globex", "Bob")
    acme_edge = (await relate(store, NewRelationship(ada, acme, "works_at", valid_from=Y2020))).item
    knows = (await relate(store, NewRelationship(ada, bob, "knows"))).item
    globex_edge = (await relate(store, NewRelationship(ada, globex, "works_at", valid_from=Y2023, supersedes=True))).item
    edges = {r.id: r for r in await store.entities.relationships_of(ada, "out")}
    assert edges[acme_edge.id].valid_to == Y2023  # closed where the new one begins, kept
    assert edges[knows.id].valid_to is None  # another label is untouched
    assert edges[globex_edge.id].valid_to is None
    [closing] = await store.history.of_record("relationships", acme_edge.id, 0, 10)
    assert closing.op == "updated" and closing.changed == ["valid_to"]


async def test_supersedes_closes_only_the_edges_of_the_same_owner(store: Store) -> None:
    # (from, label) has no owner in it: on shared (global) entities, one user's new fact must not
    # end another user's, nor a global one, and a global fact must not end a user's.
    lisbon, portugal, spain, france, italy = await entities(store, "Lisbon", "Portugal", "Spain", "France", "Italy")
    global_edge = (await relate(store, NewRelationship(lisbon, portugal, "in"))).item
    bobs = (await relate(store, NewRelationship(lisbon, spain, "in", user_id="bob"))).item
    alices_old = (await relate(store, NewRelationship(lisbon, france, "in", user_id="alice"))).item
    alices = (await relate(store, NewRelationship(lisbon, italy, "in", user_id="alice", supersedes=True))).item
    await relate(store, NewRelationship(lisbon, france, "in", supersedes=True))  # global, closes no user's
    edges = {r.id: r for r in await store.entities.relationships_of(lisbon, "out")}
    assert edges[alices_old.id].valid_to is not None  # her own earlier fact ends
    assert edges[bobs.id].valid_to is None and edges[alices.id].valid_to is None
    assert edges[global_edge.id].valid_to is not None  # closed by the global fact, not by alice's
    assert [v.op for v in await store.history.of_record("relationships", bobs.id, 0, 10)] == []


async def test_each_owner_has_its_own_open_edge_of_a_triple(store: Store) -> None:
    # The owner is part of what a relationship is, as of an entity: a user relating a triple that
    # has a global or another user's open edge makes the user's own, and upserts only that one.
    lisbon, portugal, france = await entities(store, "Lisbon", "Portugal", "France")
    global_edge = (await relate(store, NewRelationship(lisbon, portugal, "in", metadata={"by": "all"}))).item
    bobs = (await relate(store, NewRelationship(lisbon, portugal, "in", user_id="bob", metadata={"by": "bob"}))).item
    alices_france = (await relate(store, NewRelationship(lisbon, france, "in", user_id="alice"))).item
    alices = await relate(store, NewRelationship(lisbon, portugal, "in", user_id="alice", supersedes=True))
    assert alices.created and alices.item.id not in (global_edge.id, bobs.id) and alices.item.user_id == "alice"
    again = await relate(store, NewRelationship(lisbon, portugal, "in", user_id="bob", metadata={"by": "bob, again"}))
    assert not again.created and again.item.id == bobs.id
    edges = {r.id: r for r in await store.entities.relationships_of(lisbon, "out")}
    assert edges[alices_france.id].valid_to is not None  # her own other fact of (Lisbon, in) ends
    assert edges[global_edge.id].valid_to is None and edges[global_edge.id].metadata == {"by": "all"}
    assert edges[bobs.id].valid_to is None and edges[bobs.id].metadata == {"by": "bob, again"}


async def test_unrelating_with_an_owner_deletes_that_owners_edges_only(store: Store) -> None:
    lisbon, porto = await entities(store, "Lisbon", "Porto")
    for owner in (None, "alice", "bob"):
        await relate(store, NewRelationship(lisbon, porto, "near", user_id=owner))
    assert await store.uow.run(lambda tx: writes.unrelate(tx, lisbon, porto, "near", "alice")) is True
    assert await store.uow.run(lambda tx: writes.unrelate(tx, lisbon, porto, "near", "alice")) is False
    assert sorted(str(r.user_id) for r in await store.entities.relationships_of(lisbon, "out")) == ["None", "bob"]
    assert await store.uow.run(lambda tx: writes.unrelate(tx, lisbon, porto, "near")) is True
    assert await store.entities.relationships_of(lisbon, "out") == []


async def test_supersedes_without_valid_from_closes_now(store: Store) -> None:
    ada, acme, globex = await entities(store, "Ada", "Acme", "Globex")
    acme_edge = (await relate(store, NewRelationship(ada, acme, "works_at"))).item
    await relate(store, NewRelationship(ada, globex, "works_at", supersedes=True))
    [closed] = [r for r in await store.entities.relationships_of(ada, "out") if r.id == acme_edge.id]
    assert closed.valid_to is not None and closed.valid_from is None


async def test_closing_an_edge_keeps_it_and_a_new_open_edge_of_the_triple_is_a_new_row(store: Store) -> None:
    a, b = await entities(store, "A", "B")
    edge = (await relate(store, NewRelationship(a, b, "member", valid_from=Y2020))).item
    closed = await relate(store, NewRelationship(a, b, "member", valid_to=Y2021))
    assert not closed.created and closed.item.id == edge.id and closed.item.valid_from == Y2020
    assert closed.item.valid_to == Y2021
    again = await relate(store, NewRelationship(a, b, "member", valid_from=Y2022))
    assert again.created and again.item.id != edge.id
    same_closed = await relate(store, NewRelationship(a, b, "member", {"n": 1}, valid_from=Y2020, valid_to=Y2021))
    assert not same_closed.created and same_closed.item.id == edge.id and same_closed.item.metadata == {"n": 1}
    assert len(await store.entities.relationships_of(a, "out")) == 2


async def test_unrelate_deletes_the_open_and_closed_edges_of_the_triple(store: Store) -> None:
    a, b = await entities(store, "A", "B")
    await relate(store, NewRelationship(a, b, "member", valid_from=Y2020, valid_to=Y2021))
    await relate(store, NewRelationship(a, b, "member", valid_from=Y2022))
    assert await store.uow.run(lambda tx: writes.unrelate(tx, a, b, "member"))
    assert await store.entities.relationships_of(a, "out") == []


async def test_a_past_interval_before_the_open_edge_is_a_separate_edge(store: Store) -> None:
    a, b = await entities(store, "A", "B")
    current = (await relate(store, NewRelationship(a, b, "member", valid_from=Y2022))).item
    past = await relate(store, NewRelationship(a, b, "member", valid_from=Y2020, valid_to=Y2021))
    assert past.created and past.item.id != current.id
    edges = {r.id: (r.valid_from, r.valid_to) for r in await store.entities.relationships_of(a, "out")}
    assert edges == {current.id: (Y2022, None), past.item.id: (Y2020, Y2021)}


@pytest.mark.parametrize(("valid_from", "valid_to"), [(Y2022, Y2021), (Y2021, Y2021)])
async def test_valid_to_must_be_later_than_valid_from(store: Store, valid_from: str, valid_to: str) -> None:
    a, b = await entities(store, "A", "B")
    with pytest.raises(Invalid) as caught:
        await relate(store, NewRelationship(a, b, "knows", valid_from=valid_from, valid_to=valid_to))
    assert caught.value.field == "validTo"
    assert await store.entities.relationships_of(a, "out") == []


async def test_an_end_before_the_open_edge_began_is_a_past_edge_not_a_closing(store: Store) -> None:
    a, b = await entities(store, "A", "B")
    current = (await relate(store, NewRelationship(a, b, "knows", valid_from=Y2022))).item
    past = await relate(store, NewRelationship(a, b, "knows", valid_to=Y2021))
    assert past.created and (past.item.valid_from, past.item.valid_to) == (None, Y2021)
    [still_open] = [r for r in await store.entities.relationships_of(a, "out") if r.id == current.id]
    assert still_open.valid_to is None


async def test_an_edge_that_ended_is_not_reopened_while_the_triple_has_an_open_one(store: Store) -> None:
    ada, acme = await entities(store, "Ada", "Acme")
    past = (await relate(store, NewRelationship(ada, acme, "works_at", valid_from=Y2020, valid_to=Y2023))).item
    await relate(store, NewRelationship(ada, acme, "works_at", valid_from=Y2023))
    with pytest.raises(Conflict) as refused:
        await relate(store, NewRelationship(ada, acme, "works_at", valid_from=Y2020))
    assert refused.value.field == "validTo"
    [kept] = [r for r in await store.entities.relationships_of(ada, "out") if r.id == past.id]
    assert kept.valid_to == Y2023
