"""The ApiKeys port's contract, over the in-memory, SQLite and PostgreSQL adapters."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.memory.api_keys import InMemoryApiKeys
from adapters.postgres.api_keys import PostgresApiKeys
from adapters.postgres.store import PostgresStore
from adapters.sqlite.api_keys import SqliteApiKeys
from adapters.sqlite.store import SqliteStore
from domain.access import new_key
from domain.errors import Conflict
from ports.api_keys import ApiKeys

NOW = "2026-01-01T00:00:00.000Z"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def api_keys(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ApiKeys]:
    if request.param == "memory":
        yield InMemoryApiKeys()
        return
    if request.param == "postgres":
        opened = PostgresStore.open(request.getfixturevalue("postgres_url"))
        yield PostgresApiKeys(opened.database)
        await opened.close()
        return
    store = SqliteStore.open(str(tmp_path / "memory.db"))
    yield SqliteApiKeys(store.database)
    await store.close()


async def test_a_created_key_is_found_by_its_hash_and_id_with_every_field(api_keys: ApiKeys) -> None:
    _, key = new_key("ingest", scopes=["read", "write"], user_id="u1", agent_id="a1",
                     expires_at="2030-01-01T00:00:00Z", rate_limit=5.0, global_read=False, now=NOW)
    stored = await api_keys.create(key)
    assert stored.id >= 1
    assert await api_keys.by_hash(key.key_hash) == stored
    assert await api_keys.get(stored.id) == stored
    assert (stored.name, stored.scopes, stored.user_id, stored.agent_id, stored.expires_at, stored.rate_limit,
            stored.global_read, stored.created_at) == ("ingest", ("read", "write"), "u1", "a1",
                                                       "2030-01-01T00:00:00.000Z", 5.0, False, NOW)


async def test_the_secret_itself_is_never_stored(api_keys: ApiKeys) -> None:
    secret, key = new_key("k", now=NOW)
    stored = await api_keys.create(key)
    assert secret not in repr(stored)
    assert stored.key_hash != secret and len(stored.key_hash) == 64


async def test_unknown_hashes_and_ids_answer_none(api_keys: ApiKeys) -> None:
    assert await api_keys.by_hash("0" * 64) is None
    assert await api_keys.get(99) is None
    assert await api_keys.revoke(99, NOW) is None
    await api_keys.touch(99, NOW)  # a no-op, not an error
    assert await api_keys.list() == []


async def test_two_keys_with_one_hash_conflict(api_keys: ApiKeys) -> None:
    _, key = new_key("k", now=NOW)
    await api_keys.create(key)
    with pytest.raises(Conflict):
        await api_keys.create(key)


async def test_keys_list_by_id_and_ids_are_not_reused(api_keys: ApiKeys) -> None:
    first = await api_keys.create(new_key("a", now=NOW)[1])
    second = await api_keys.create(new_key("b", now=NOW)[1])
    assert [k.id for k in await api_keys.list()] == [first.id, second.id]
    assert second.id > first.id


async def test_revoking_keeps_the_key_listed_and_the_first_revocation_time(api_keys: ApiKeys) -> None:
    key = await api_keys.create(new_key("a", now=NOW)[1])
    assert await api_keys.count_active() == 1
    revoked = await api_keys.revoke(key.id, "2026-02-01T00:00:00.000Z")
    again = await api_keys.revoke(key.id, "2026-03-01T00:00:00.000Z")
    assert revoked is not None and again is not None
    assert revoked.revoked_at == again.revoked_at == "2026-02-01T00:00:00.000Z"
    assert [k.id for k in await api_keys.list()] == [key.id]
    assert await api_keys.count_active() == 0


async def test_touch_records_the_last_use(api_keys: ApiKeys) -> None:
    key = await api_keys.create(new_key("a", now=NOW)[1])
    await api_keys.touch(key.id, "2026-01-02T00:00:00.000Z")
    found = await api_keys.get(key.id)
    assert found is not None and found.last_used_at == "2026-01-02T00:00:00.000Z"
