"""The ``KeywordIndex`` port over every adapter: the index follows every write.

Plain modes (``all``/``any``) must behave alike everywhere: terms are words, never syntax. Only
``fts`` mode may differ, and the suite asks the port (``parses_query_syntax``) how; it never
asks which adapter it holds.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from domain import writes
from domain.errors import Invalid
from domain.keywords import KeywordQuery, plain_query, recall_query
from domain.models import EpisodeChanges, NewEntity, NewEpisode, NewSummary, Owner, format_timestamp
from ports.store import Store
from tests.contract.store_helpers import SYNTAX_AND_UNICODE, T0, a_session, at, search


async def test_a_new_episode_is_found_by_its_words(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "Where is the lighthouse?", "On the cliff.")]))
    assert await search(store, "lighthouse") == [episode.id]
    assert await search(store, "cliff") == [episode.id]
    assert await search(store, "LIGHTHOUSE cliff") == [episode.id]
    assert await search(store, "submarine") == []


async def test_an_updated_episode_is_found_by_its_new_words_only(store: Store) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "tell me about penguins", "they swim")]))
    await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(user_message="tell me about giraffes")))
    assert await search(store, "penguins") == []
    assert await search(store, "giraffes") == [episode.id]
    assert await search(store, "swim") == [episode.id]
    await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(metadata={"only": "metadata"})))
    assert await search(store, "giraffes swim") == [episode.id]


async def test_a_deleted_episode_is_no_longer_found(store: Store) -> None:
    session = await a_session(store)
    gone, kept = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "volcano", "lava"),
                                           NewEpisode(session.id, "volcano", "ash")]))
    await store.uow.run(lambda tx: writes.delete_episode(tx, gone.id))
    assert await search(store, "volcano") == [kept.id]
    assert await search(store, "lava") == []


async def test_episodes_of_a_deleted_session_are_no_longer_found(store: Store) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "glacier", "ice")]))
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "a chat about glacier ice")))
    await store.uow.run(lambda tx: writes.delete_session(tx, session.id))
    assert await search(store, "glacier") == []
    assert await search(store, "glacier", source="summaries") == []


async def test_summaries_are_keyword_searchable(store: Store) -> None:
    session, other = await a_session(store, "a"), await a_session(store, "b")
    mine = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "planning the trip to Lisbon")))
    theirs = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(other.id, "a trip to Porto")))
    assert set(await search(store, "trip", source="summaries")) == {mine.id, theirs.id}
    assert await search(store, "trip", source="summaries", session_id=session.id) == [mine.id]
    await store.uow.run(lambda tx: writes.delete_summary(tx, mine.id))
    assert await search(store, "lisbon", source="summaries") == []


async def test_entities_are_searchable_by_name_type_and_notes_and_follow_upserts(store: Store) -> None:
    ada = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada Lovelace", "person", "wrote notes on the engine")))).item
    assert await search(store, "lovelace", source="entities") == [ada.id]
    assert await search(store, "person", source="entities") == [ada.id]
    assert await search(store, "engine", source="entities", session_id=12345) == [ada.id]  # no session filter
    await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada Lovelace", "person", "a poet's daughter")))
    assert await search(store, "engine", source="entities") == []
    assert await search(store, "daughter", source="entities") == [ada.id]
    await store.uow.run(lambda tx: writes.delete_entity(tx, ada.id))
    assert await search(store, "daughter", source="entities") == []


async def test_all_mode_needs_every_term_and_any_mode_needs_one(store: Store) -> None:
    session = await a_session(store)
    both, apple, pear = await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(session.id, "apple and pear", "x"),
        NewEpisode(session.id, "apple only", "x"),
        NewEpisode(session.id, "pear only", "x"),
    ]))
    assert await search(store, "apple pear", "all") == [both.id]
    found = await search(store, "apple pear", "any")
    assert found[0] == both.id and set(found) == {both.id, apple.id, pear.id}


async def test_words_match_whole_never_as_prefixes(store: Store) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "category theory", "alphabet")]))
    assert await search(store, "cat") == []
    assert await search(store, "alpha") == []


async def test_a_recall_query_drops_stop_words_and_matches_any_term(store: Store) -> None:
    session = await a_session(store)
    [trip, _] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "she did say the trip to Rome", "was lovely"),
                                          NewEpisode(session.id, "what did she say", "nothing")]))
    hits = await store.keywords.search("episodes", recall_query("what did she say about the trip"), 10)
    assert hits[0].item.id == trip.id


async def test_keyword_search_filters_by_session(store: Store) -> None:
    mine, theirs = await a_session(store, "a"), await a_session(store, "b")
    [a] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(mine.id, "kayak", "x")]))
    [b] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(theirs.id, "kayak", "x")]))
    assert set(await search(store, "kayak")) == {a.id, b.id}
    assert await search(store, "kayak", session_id=mine.id) == [a.id]
    assert await search(store, "kayak", session_id=999) == []


async def test_keyword_search_filters_by_since_and_until_inclusively(store: Store) -> None:
    session = await a_session(store)
    made = await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(session.id, "comet", "x", created_at=format_timestamp(T0 + timedelta(days=d))) for d in range(4)
    ]))
    q = plain_query("comet")
    window = await store.keywords.search("episodes", q, 10, since=T0 + timedelta(days=1), until=T0 + timedelta(days=2))
    assert sorted(h.item.id for h in window) == [made[1].id, made[2].id]
    later = await store.keywords.search("episodes", q, 10, since=T0 + timedelta(days=3))
    assert [h.item.id for h in later] == [made[3].id]
    earlier = await store.keywords.search("episodes", q, 10, until=T0 - timedelta(seconds=1))
    assert earlier == []


async def test_keyword_search_returns_at_most_limit_hits(store: Store) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"meteor number {i}", "x") for i in range(7)]))
    assert len(await search(store, "meteor", limit=3)) == 3
    assert len(await search(store, "meteor", limit=50)) == 7
    assert await search(store, "meteor", limit=0) == []


async def test_keyword_search_ranks_the_best_match_first(store: Store) -> None:
    session = await a_session(store)
    once, often, both = await store.uow.run(lambda tx: writes.add_episodes(tx, [
        NewEpisode(session.id, "a note about the harbour and many other unrelated things today", "fine"),
        NewEpisode(session.id, "harbour harbour harbour", "harbour"),
        NewEpisode(session.id, "harbour lights at night", "x"),
    ]))
    hits = await store.keywords.search("episodes", plain_query("harbour"), 10)
    assert hits[0].item.id == often.id
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    any_hits = await store.keywords.search("episodes", plain_query("harbour night", "any"), 10)
    assert any_hits[0].item.id == both.id and {h.item.id for h in any_hits} == {once.id, often.id, both.id}


async def test_an_episode_with_many_words_is_found_by_its_last_word(store: Store) -> None:
    session = await a_session(store)
    long_text = " ".join(f"word{i}" for i in range(500)) + " zeppelin"
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, long_text, "x")]))
    assert await search(store, "zeppelin") == [episode.id]
    assert await search(store, "word499") == [episode.id]


@pytest.mark.parametrize("text", ["", "   ", "!!! ??? ...", "( ) \" * : ^ -", "😀🎉"])
@pytest.mark.parametrize("mode", ["all", "any"])
async def test_an_empty_or_wordless_query_finds_nothing(store: Store, text: str, mode: str) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "something to find", "!!! ??? ...")]))
    assert await search(store, text, mode) == []
    assert await store.keywords.search("episodes", KeywordQuery(terms=()), 10) == []


@pytest.mark.parametrize("text", SYNTAX_AND_UNICODE)
@pytest.mark.parametrize("source", ["episodes", "summaries", "entities"])
async def test_user_text_with_syntax_characters_is_searched_as_plain_words(
    store: Store, text: str, source: str
) -> None:
    session = await a_session(store)
    [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, text, "reply")]))
    summary = await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, text)))
    entity = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("thing", "kind", text)))).item
    expected = {"episodes": episode.id, "summaries": summary.id, "entities": entity.id}[source]
    for mode in ("all", "any"):
        assert await search(store, text, mode, source=source) == [expected]


@pytest.mark.parametrize("text", SYNTAX_AND_UNICODE + ['"unterminated', "AND", "foo:bar", "(", "*", "NEAR("])
async def test_fts_mode_never_fails_except_with_invalid_on_q(store: Store, text: str) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "something", "else")]))
    try:
        hits = await store.keywords.search("episodes", plain_query(text, "fts"), 10)
    except Invalid as error:
        assert store.keywords.parses_query_syntax, "only a store that parses FTS syntax may reject it"
        assert error.field == "q"
    else:
        assert isinstance(hits, list)


@pytest.mark.parametrize("text", ['"unterminated', "AND", "(", "NEAR("])
async def test_an_fts_syntax_error_is_invalid_on_q_where_syntax_is_supported(store: Store, text: str) -> None:
    query = plain_query(text, "fts")
    if not store.keywords.parses_query_syntax:
        assert isinstance(await store.keywords.search("episodes", query, 10), list)
        return
    with pytest.raises(Invalid) as raised:
        await store.keywords.search("episodes", query, 10)
    assert raised.value.field == "q"


async def test_fts_mode_passes_syntax_through_where_supported(store: Store) -> None:
    session = await a_session(store)
    alpha, zeta = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "alpha", "x"), NewEpisode(session.id, "zeta", "x")]))
    either = await store.keywords.search("episodes", plain_query("alpha OR zeta", "fts"), 10)
    prefix = await store.keywords.search("episodes", plain_query("alph*", "fts"), 10)
    if store.keywords.parses_query_syntax:
        assert {h.item.id for h in either} == {alpha.id, zeta.id}
        assert [h.item.id for h in prefix] == [alpha.id]
    else:  # the same text read as plain terms: "alpha", "or", "zeta" all required
        assert either == []
        assert await search(store, "alpha", "fts") == [alpha.id]


async def test_an_owner_with_global_records_keeps_that_users_records_and_those_of_no_user(store: Store) -> None:
    sessions = {}
    for name, owner in (("ana", Owner("ana", "bot")), ("bob", Owner("bob")), ("shared", Owner())):
        sessions[name] = await store.uow.run(lambda tx: writes.create_session(tx, name, {}, owner))
    ids = {}
    for name, session in sessions.items():
        [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "kite", name)]))
        ids[name] = episode.id

    async def found(owner: Owner, global_records: bool) -> set[int]:
        hits = await store.keywords.search("episodes", plain_query("kite", "all"), 10, owner=owner,
                                           global_records=global_records)
        return {hit.item.id for hit in hits}

    assert await found(Owner("ana"), False) == {ids["ana"]}
    assert await found(Owner("ana"), True) == {ids["ana"], ids["shared"]}
    assert await found(Owner("ana", "other"), True) == {ids["shared"]}
    assert await found(Owner("ana", "bot"), True) == {ids["ana"], ids["shared"]}
    assert await found(Owner(), True) == set(ids.values())
