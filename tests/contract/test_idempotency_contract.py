"""The ``IdempotencyRecords`` port over every adapter: a keyed write's answer commits with the write,
is found again until it expires, never answers another caller, and is swept once expired."""

from __future__ import annotations

import pytest

from domain import writes
from domain.idempotency import AlreadyAnswered, Answer, Claim, KeyedAnswer, keyed, pending
from domain.models import NewEpisode
from domain.services import EpisodeService, ExpiryService
from ports.store import Store
from tests.contract.store_helpers import a_session

EARLIER = "2025-12-31T00:00:00.000Z"
NOW, LATER, AFTER = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


def _answer(key: str = "k1", caller: str = "anonymous", expires_at: str = LATER, body: bytes = b'{"id":1}',
            fingerprint: str = "f1") -> KeyedAnswer:
    return KeyedAnswer(caller, key, fingerprint, 201, body, NOW, expires_at)


async def test_a_stored_answer_is_found_with_its_bytes_until_it_expires(store: Store) -> None:
    stored = _answer(body=b'{"id":1,"text":"\xc3\xa9"}')
    await store.uow.run(lambda tx: tx.idempotency.put(stored))
    assert await store.idempotency.get("anonymous", "k1", NOW) == stored
    assert await store.idempotency.get("anonymous", "k1", LATER) is None  # expired: as good as unknown


async def test_a_key_answers_only_its_own_caller(store: Store) -> None:
    await store.uow.run(lambda tx: tx.idempotency.put(_answer(caller="bearer:a")))
    assert await store.idempotency.get("bearer:b", "k1", NOW) is None
    assert await store.idempotency.get("anonymous", "k1", NOW) is None


async def test_storing_a_live_key_twice_fails_and_keeps_the_first(store: Store) -> None:
    await store.uow.run(lambda tx: tx.idempotency.put(_answer()))
    with pytest.raises(Exception):
        await store.uow.run(lambda tx: tx.idempotency.put(_answer(fingerprint="other")))
    assert (await store.idempotency.get("anonymous", "k1", NOW)).fingerprint == "f1"


async def test_an_expired_key_can_be_stored_again(store: Store) -> None:
    await store.uow.run(lambda tx: tx.idempotency.put(_answer(expires_at=NOW)))
    again = KeyedAnswer("anonymous", "k1", "f2", 200, b"{}", LATER, AFTER)
    await store.uow.run(lambda tx: tx.idempotency.put(again))
    assert await store.idempotency.get("anonymous", "k1", LATER) == again


async def test_a_unit_that_raises_leaves_no_stored_answer(store: Store) -> None:
    def fails(tx):
        tx.idempotency.put(_answer())
        raise RuntimeError("the write failed")

    with pytest.raises(RuntimeError):
        await store.uow.run(fails)
    assert await store.idempotency.get("anonymous", "k1", NOW) is None


async def test_the_sweep_deletes_expired_keys_only_up_to_its_limit(store: Store) -> None:
    for n in range(3):
        await store.uow.run(lambda tx, n=n: tx.idempotency.put(_answer(key=f"old{n}", expires_at=NOW)))
    await store.uow.run(lambda tx: tx.idempotency.put(_answer(key="live", expires_at=AFTER)))
    assert await store.uow.run(lambda tx: writes.purge_expired_keys(tx, LATER, 2)) == 2
    assert await store.uow.run(lambda tx: writes.purge_expired_keys(tx, LATER, 2)) == 1
    assert await store.idempotency.get("anonymous", "live", LATER) is not None


async def test_the_expiry_sweep_purges_expired_keys_with_expired_records(store: Store) -> None:
    await store.uow.run(lambda tx: tx.idempotency.put(_answer(key="old", expires_at=NOW)))
    await store.uow.run(lambda tx: tx.idempotency.put(_answer(key="live", expires_at=AFTER)))
    await ExpiryService(store).purge(LATER)
    assert await store.idempotency.get("anonymous", "old", EARLIER) is None  # gone, not only expired
    assert await store.idempotency.get("anonymous", "live", LATER) is not None
    assert await ExpiryService(store).purge_keys(LATER) == 0  # nothing expired is left


async def test_a_keyed_write_stores_its_rendered_answer_with_the_write(store: Store) -> None:
    session = await a_session(store)
    claim = Claim("anonymous", "k1", "f1", "9999-01-01T00:00:00.000Z")
    claim.render = lambda episode: Answer(201, str(episode.id).encode())
    token = pending.set(claim)
    try:
        episode = await EpisodeService(store).add(NewEpisode(session.id, "u", "a"))
    finally:
        pending.reset(token)
    found = await store.idempotency.get("anonymous", "k1", NOW)
    assert (found.status, found.body) == (201, str(episode.id).encode())
    assert claim.stored == found


async def test_a_unit_under_an_answered_key_writes_nothing_and_names_the_answer(store: Store) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: tx.idempotency.put(_answer(expires_at="9999-01-01T00:00:00.000Z")))
    claim = Claim("anonymous", "k1", "f1", "9999-01-01T00:00:00.000Z", render=lambda _: Answer(201, b"{}"))
    token = pending.set(claim)
    try:
        with pytest.raises(AlreadyAnswered) as answered:
            await EpisodeService(store).add(NewEpisode(session.id, "u", "a"))
    finally:
        pending.reset(token)
    assert answered.value.found.body == b'{"id":1}'
    assert (await store.episodes.list(session.id, 10, 0)).total == 0


async def test_only_the_first_unit_of_a_request_takes_its_key(store: Store) -> None:
    session = await a_session(store)
    claim = Claim("anonymous", "k1", "f1", "9999-01-01T00:00:00.000Z", render=lambda e: Answer(201, b"first"))
    token = pending.set(claim)
    try:
        service = EpisodeService(store)
        await service.add(NewEpisode(session.id, "u", "a"))
        await service.add(NewEpisode(session.id, "u2", "a2"))  # not keyed: the claim was taken
    finally:
        pending.reset(token)
    assert (await store.episodes.list(session.id, 10, 0)).total == 2
    assert (await store.idempotency.get("anonymous", "k1", NOW)).body == b"first"
