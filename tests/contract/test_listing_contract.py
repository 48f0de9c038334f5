"""The ``Listing`` port over every store adapter: filters, both orders, and keyset pages that stay
correct while rows are written between them."""

from __future__ import annotations

import pytest

from domain import writes
from domain.filters import parse_filter
from domain.listing import ListQuery, Position
from domain.models import NewEntity, NewEpisode, NewRelationship, NewSummary
from tests.contract.store_helpers import a_session, at


async def _episodes(store, session_id, minutes, meta=lambda m: {"m": m}):
    new = [NewEpisode(session_id, f"u{m}", f"a{m}", metadata=meta(m), created_at=at(m)) for m in minutes]
    return await store.uow.run(lambda tx: writes.add_episodes(tx, new))


async def _walk(fetch, **fields):
    """Every page of a list, following ``next``; the ids in the order the pages gave them."""
    seen, after = [], None
    while True:
        page = await fetch(ListQuery(after=after, **fields))
        assert len(page.items) <= fields["limit"]
        seen += [r.id for r in page.items]
        if page.next is None:
            return seen
        assert page.next == Position(page.items[-1].created_at, page.items[-1].id)
        after = page.next


async def test_episodes_are_listed_by_created_at_then_id_in_both_orders(store):
    s = await a_session(store)
    # Given out of time order, with a tie on created_at that id breaks.
    made = await _episodes(store, s.id, [5, 1, 3, 3, 0])
    by_key = [e.id for e in sorted(made, key=lambda e: (e.created_at, e.id))]
    assert await _walk(store.listing.episodes, limit=2) == by_key
    assert await _walk(store.listing.episodes, limit=2, order="desc") == by_key[::-1]
    assert await _walk(store.listing.episodes, limit=100) == by_key


async def test_the_last_page_says_so_and_an_exact_fit_has_no_next(store):
    s = await a_session(store)
    await _episodes(store, s.id, [1, 2])
    page = await store.listing.episodes(ListQuery(limit=2))
    assert len(page.items) == 2 and page.next is None
    empty = await store.listing.summaries(ListQuery(limit=5))
    assert empty.items == [] and empty.next is None


async def test_episodes_filter_by_session_and_metadata(store):
    a, b = await a_session(store, "a"), await a_session(store, "b")
    ea = await _episodes(store, a.id, [1, 2, 3, 4], meta=lambda m: {"even": m % 2 == 0, "m": m})
    await _episodes(store, b.id, [1, 2], meta=lambda m: {"even": m % 2 == 0, "m": m})
    assert await _walk(store.listing.episodes, limit=1, session_id=a.id) == [e.id for e in ea]
    even = parse_filter({"metadata": {"even": True, "m": {"gte": 2}}})
    got = await _walk(store.listing.episodes, limit=1, session_id=a.id, metadata=even)
    assert got == [ea[1].id, ea[3].id]
    everywhere = await _walk(store.listing.episodes, limit=10, metadata=parse_filter({"metadata": {"m": 1}}))
    assert len(everywhere) == 2


async def test_a_walk_never_repeats_or_skips_rows_that_existed_while_rows_are_inserted(store):
    s = await a_session(store)
    before = await _episodes(store, s.id, list(range(0, 20, 2)))  # 0, 2, ... 18
    for order in ("asc", "desc"):
        seen, after, inserted = [], None, 0
        while True:
            page = await store.listing.episodes(ListQuery(limit=3, order=order, after=after))
            seen += [e.id for e in page.items]
            # Between pages: one row behind the cursor, one ahead of it, one at a tied created_at.
            inserted += 1
            await _episodes(store, s.id, [inserted * 2 - 1, 30 + inserted])
            if page.next is None:
                break
            after = page.next
        assert len(seen) == len(set(seen)), "a row came twice"
        assert {e.id for e in before} <= set(seen), "a row that existed was skipped"


async def test_entities_filter_by_type_and_metadata(store):
    made = []
    for name, kind, meta in [("Ana", "person", {"vip": True}), ("Lisbon", "place", {}), ("Rui", "person", {})]:
        made.append((await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, kind, None, meta)))).item)
    people = await _walk(store.listing.entities, limit=1, type="person")
    assert people == [made[0].id, made[2].id]
    vip = await _walk(store.listing.entities, limit=5, metadata=parse_filter({"metadata": {"vip": {"exists": True}}}))
    assert vip == [made[0].id]
    assert await _walk(store.listing.entities, limit=5, order="desc") == [e.id for e in made][::-1]


async def test_relationships_filter_by_either_end_and_label(store):
    ids = []
    for name in ("a", "b", "c"):
        ids.append((await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(name, "t")))).item.id)
    a, b, c = ids
    edges = []
    for f, t, label in [(a, b, "knows"), (b, c, "knows"), (c, a, "likes")]:
        edges.append((await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(f, t, label, {"l": label})))).item)
    assert await _walk(store.listing.relationships, limit=1, entity_id=a) == [edges[0].id, edges[2].id]
    assert await _walk(store.listing.relationships, limit=1, label="knows") == [edges[0].id, edges[1].id]
    assert await _walk(store.listing.relationships, limit=5, entity_id=b, label="knows") == [edges[0].id, edges[1].id]
    liked = await _walk(store.listing.relationships, limit=5, metadata=parse_filter({"metadata": {"l": "likes"}}))
    assert liked == [edges[2].id]


async def test_summaries_and_sessions_list_with_filters(store):
    s1, s2 = await a_session(store, "one"), await a_session(store, "two")
    made = []
    for sid, text in [(s1.id, "x"), (s2.id, "y"), (s1.id, "z")]:
        made.append(await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(sid, text, metadata={"t": text}))))
    assert await _walk(store.listing.summaries, limit=1, session_id=s1.id) == [made[0].id, made[2].id]
    assert await _walk(store.listing.summaries, limit=1, metadata=parse_filter({"metadata": {"t": {"in": ["y"]}}})) \
        == [made[1].id]
    await store.uow.run(lambda tx: writes.update_session(tx, s2.id, {"user": "ana"}))
    assert await _walk(store.listing.sessions, limit=1) == [s1.id, s2.id]
    assert await _walk(store.listing.sessions, limit=1, order="desc") == [s2.id, s1.id]
    assert await _walk(store.listing.sessions, limit=5, metadata=parse_filter({"metadata": {"user": "ana"}})) == [s2.id]


@pytest.mark.parametrize("flt", [
    {"metadata": {"n": {"gt": 1, "lt": 4}}},
    {"metadata": {"n": {"in": [1, "1", True]}}},
    {"metadata": {"s": {"gte": "b"}}},
    {"metadata": {"n": {"exists": False}}},
])
async def test_the_metadata_filter_agrees_with_the_reference(store, flt):
    s = await a_session(store)
    metas = [{"n": 1}, {"n": "1"}, {"n": True}, {"n": 3.5}, {"s": "c"}, {"s": "a"}, {}, {"n": None}]
    made = await _episodes(store, s.id, range(len(metas)), meta=lambda m: metas[m])
    expected = [e.id for e in made if parse_filter(flt).matches(e.metadata)]
    assert await _walk(store.listing.episodes, limit=3, metadata=parse_filter(flt)) == expected


async def test_owner_filters_keep_each_kinds_owned_records(store):
    from domain.models import Owner

    alice = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}, Owner("alice", "helper")))
    bob = await store.uow.run(lambda tx: writes.create_session(tx, "b", {}, Owner("bob", None)))
    nobody = await a_session(store, "c")
    eps = {s.id: await _episodes(store, s.id, [1, 2]) for s in (alice, bob, nobody)}
    sums = {s.id: await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(s.id, "x"))) for s in (alice, bob)}
    assert await _walk(store.listing.sessions, limit=1, user_id="alice") == [alice.id]
    assert await _walk(store.listing.sessions, limit=1, agent_id="helper") == [alice.id]
    assert await _walk(store.listing.episodes, limit=1, user_id="alice") == [e.id for e in eps[alice.id]]
    assert await _walk(store.listing.episodes, limit=1, user_id="bob", agent_id="helper") == []
    assert await _walk(store.listing.summaries, limit=1, user_id="bob") == [sums[bob.id].id]
    assert len(await _walk(store.listing.episodes, limit=2)) == 6  # no owner: everybody's, as the seed

    mine = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ana", "person", None, {}, "alice")))).item
    glob = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ana", "person")))).item
    assert await _walk(store.listing.entities, limit=1, user_id="alice") == [mine.id]
    assert await _walk(store.listing.entities, limit=1) == [mine.id, glob.id]
    edge = (await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(mine.id, glob.id, "is", {}, "alice")))).item
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(glob.id, mine.id, "is")))
    assert await _walk(store.listing.relationships, limit=1, user_id="alice") == [edge.id]


async def test_expired_records_are_never_listed(store):
    s = await a_session(store)
    new = [NewEpisode(s.id, "gone", "x", expires_at="2001-01-01T00:00:00.000Z"),
           NewEpisode(s.id, "kept", "x", expires_at="2999-01-01T00:00:00.000Z"), NewEpisode(s.id, "plain", "x")]
    made = await store.uow.run(lambda tx: writes.add_episodes(tx, new))
    assert await _walk(store.listing.episodes, limit=1) == [made[1].id, made[2].id]
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("old", "t", expires_at="2001-01-01T00:00:00.000Z")))
    assert await _walk(store.listing.entities, limit=5) == []
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(s.id, "old", expires_at="2001-01-01T00:00:00.000Z")))
    assert await _walk(store.listing.summaries, limit=5) == []


async def test_renaming_respects_the_owners_uniqueness(store):
    from domain.errors import Conflict
    from domain.models import EntityChanges

    mine = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ana", "person", None, {}, "alice")))).item
    other = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Rui", "person", None, {}, "alice")))).item
    glob = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Rui", "person")))).item
    with pytest.raises(Conflict):
        await store.uow.run(lambda tx: writes.update_entity(tx, other.id, EntityChanges(name="Ana")))
    # The global "Rui" may become "Ana": alice's "Ana" is another owner's.
    renamed = await store.uow.run(lambda tx: writes.update_entity(tx, glob.id, EntityChanges(name="Ana")))
    assert (renamed.name, renamed.user_id) == ("Ana", None) and (await store.entities.get(mine.id)) == mine
