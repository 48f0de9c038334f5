"""Forgetting a user (``writes.forget_user`` over ``SessionWrites.delete_owned`` and
``EntityWrites.delete_owned``), and owner/expiry reads, over every store adapter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain import writes
from domain.keywords import plain_query
from domain.models import NewEntity, NewEpisode, NewRelationship, NewSummary, Owner, format_timestamp
from ports.store import Store


async def test_forgetting_a_user_deletes_what_they_own_and_queues_the_vector_deletes(store: Store) -> None:
    mine = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}, Owner("u1")))
    theirs = await store.uow.run(lambda tx: writes.create_session(tx, "b", {}, Owner("u2")))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(mine.id, "penguins", "x"),
                                                            NewEpisode(theirs.id, "penguins", "y")]))
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(mine.id, "penguins summary")))
    ada = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", user_id="u1")))).item
    zoo = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Zoo", "place")))).item
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(ada.id, zoo.id, "visits")))
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(zoo.id, zoo.id, "self", user_id="u1")))
    before = (await store.outbox.backlog()).pending
    counts = await store.uow.run(lambda tx: writes.forget_user(tx, "u1"))
    assert counts == {"sessions": 1, "episodes": 1, "summaries": 1, "entities": 1, "relationships": 2}
    assert await store.sessions.get(mine.id) is None and await store.entities.get(ada.id) is None
    assert await store.entities.get(zoo.id) is not None and await store.entities.relationships_of(zoo.id, "both") == []
    hits = await store.keywords.search("episodes", plain_query("penguins", "all"), 10)
    assert [h.item.session_id for h in hits] == [theirs.id]
    assert (await store.outbox.backlog()).pending == before + 3  # episodes + summaries by session, the entity
    assert await store.uow.run(lambda tx: writes.forget_user(tx, "u1")) == dict.fromkeys(counts, 0)


async def test_keyword_search_keeps_the_owners_records(store: Store) -> None:
    a = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}, Owner("u1", "bot")))
    b = await store.uow.run(lambda tx: writes.create_session(tx, "b", {}, Owner("u2", "bot")))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(a.id, "penguins", "x"),
                                                            NewEpisode(b.id, "penguins", "y")]))
    query = plain_query("penguins", "all")
    found = await store.keywords.search("episodes", query, 10, owner=Owner("u1"))
    assert [h.item.session_id for h in found] == [a.id]
    assert len(await store.keywords.search("episodes", query, 10, owner=Owner(agent_id="bot"))) == 2
    assert await store.keywords.search("episodes", query, 10, owner=Owner("u2", "other")) == []


async def test_expired_records_are_never_read(store: Store) -> None:
    past = format_timestamp(datetime.now(UTC) - timedelta(minutes=1))
    future = format_timestamp(datetime.now(UTC) + timedelta(days=1))
    s = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}))
    old, new = await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(s.id, "penguins old", "x", expires_at=past), NewEpisode(s.id, "penguins new", "y", expires_at=future)]))
    assert new.expires_at == future
    assert await store.episodes.get(old.id) is None and await store.episodes.get(new.id) == new
    assert [e.id for e in await store.episodes.get_many([old.id, new.id])] == [new.id]
    assert [e.id for e in (await store.episodes.list(s.id, 10, 0)).items] == [new.id]
    assert [e.id for e in await store.episodes.recent(s.id, 10)] == [new.id]
    hits = await store.keywords.search("episodes", plain_query("penguins", "all"), 10)
    assert [h.item.id for h in hits] == [new.id]
    gone = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(s.id, "sum", expires_at=past)))
    assert await store.summaries.get(gone.id) is None and await store.summaries.list(s.id) == []
    ent = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "p", expires_at=past)))).item
    assert await store.entities.get(ent.id) is None and await store.entities.find_by_name("Ada", 5) == []
    revived = await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "p")))
    assert revived.item.id == ent.id and await store.entities.get(ent.id) is not None  # an upsert renews it


async def test_purging_deletes_only_expired_records_and_queues_their_vector_deletes(store: Store) -> None:
    from domain.services import ExpiryService

    past = format_timestamp(datetime.now(UTC) - timedelta(minutes=1))
    future = format_timestamp(datetime.now(UTC) + timedelta(days=1))
    s = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(s.id, "penguins old", "x", expires_at=past), NewEpisode(s.id, "penguins new", "y", expires_at=future),
        NewEpisode(s.id, "penguins forever", "z")]))
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(s.id, "sum", expires_at=past)))
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "p", expires_at=past)))
    before = (await store.outbox.backlog()).pending
    service = ExpiryService(store)
    service.BATCH = 1  # several units of work, each small
    assert await service.purge() == {"episodes": 1, "entities": 1, "summaries": 1}
    assert (await store.outbox.backlog()).pending == before + 3
    assert (await store.operations.counts())["episodes"] == 2
    assert await service.purge() == {"episodes": 0, "entities": 0, "summaries": 0}
    assert await service.purge(future) == {"episodes": 1, "entities": 0, "summaries": 0}


async def test_an_entity_is_unique_per_owner_and_no_owner_is_the_global_one(store: Store) -> None:
    def upsert(user, notes=None):
        return store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person", notes, user_id=user)))

    made = [await upsert(u) for u in (None, "u1", "u2")]
    assert all(m.created for m in made) and len({m.item.id for m in made}) == 3
    assert [m.item.user_id for m in made] == [None, "u1", "u2"]
    again = await upsert("u1", "updated")
    assert not again.created and again.item.id == made[1].item.id and again.item.notes == "updated"
    assert (await upsert(None, "global")).item.id == made[0].item.id
    texts = ["Ada was here"]
    assert {e.id for e in await store.entities.mentioned_in(texts, 10, "u1")} == {made[0].item.id, made[1].item.id}
    assert len(await store.entities.mentioned_in(texts, 10)) == 3
