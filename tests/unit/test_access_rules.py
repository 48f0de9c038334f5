"""The access rules as pure functions, and the authenticator over the in-memory key store with a
hand-driven clock: the cache of verified keys, revocation, expiry, last use written at most once
a minute, and the token bucket per key."""

from __future__ import annotations

import pytest

from adapters.memory.api_keys import InMemoryApiKeys
from app.auth import Authenticator, Denied, TokenBucket
from domain.access import (
    ADMIN_PRINCIPAL, OPEN_PRINCIPAL, Principal, hash_key, may_change, may_see, new_key, reading_owner, same_secret,
    writing_owner,
)
from domain.errors import Forbidden, Invalid
from domain.models import Owner

NOW = "2026-01-01T00:00:00.000Z"
U1 = Principal(frozenset({"read", "write"}), 1, "u1")
U1_AGENT = Principal(frozenset({"read", "write"}), 2, "u1", "tutor")


def test_a_key_is_a_prefixed_random_secret_stored_only_as_its_sha256():
    secret, key = new_key("k", now=NOW)
    assert secret.startswith("nxm_") and len(secret) > 40
    assert key.key_hash == hash_key(secret) != secret
    assert same_secret(secret, secret) and not same_secret(secret, secret[:-1] + "x")


def test_a_bound_key_sees_its_users_records_and_the_global_ones_unless_told_otherwise():
    assert may_see(U1, "u1") and may_see(U1, None) and not may_see(U1, "u2")
    private = Principal(frozenset({"read"}), 3, "u1", global_read=False)
    assert not may_see(private, None) and may_see(private, "u1")
    assert may_see(U1_AGENT, "u1", "tutor") and not may_see(U1_AGENT, "u1", "coach")
    assert may_see(U1_AGENT, "u1", None)  # the user's entities have no agent


def test_a_bound_key_changes_only_its_own_records_never_the_global_ones():
    assert may_change(U1, "u1") and not may_change(U1, None) and not may_change(U1, "u2")
    assert may_change(ADMIN_PRINCIPAL, None) and may_change(OPEN_PRINCIPAL, "anyone")
    assert not may_change(Principal(frozenset({"read"}), 4, "u1"), "u1")


def test_the_owner_of_a_write_must_be_the_keys_and_a_refusal_names_the_field():
    assert writing_owner(U1, Owner("u1")) == Owner("u1")
    for owner, field in ((Owner("u2"), "userId"), (Owner(None), "userId")):
        with pytest.raises(Forbidden) as refused:
            writing_owner(U1, owner)
        assert refused.value.field == field
    with pytest.raises(Forbidden) as refused:
        writing_owner(U1_AGENT, Owner("u1", "coach"))
    assert refused.value.field == "agentId"


def test_a_bound_keys_lists_are_narrowed_to_its_owner():
    assert reading_owner(U1, Owner()) == Owner("u1")
    assert reading_owner(U1_AGENT, Owner()) == Owner("u1", "tutor")
    assert reading_owner(ADMIN_PRINCIPAL, Owner()) == Owner()
    with pytest.raises(Forbidden):
        reading_owner(U1, Owner("u2"))


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"scopes": ["root"]}, "scopes"), ({"scopes": []}, "scopes"), ({"agent_id": "a"}, "agentId"),
    ({"user_id": "u", "scopes": ["admin"]}, "scopes"), ({"expires_at": "tomorrow"}, "expiresAt"),
    ({"rate_limit": -1}, "rateLimit"), ({"user_id": " "}, "userId"),
])
def test_a_key_that_cannot_work_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(Invalid) as refused:
        new_key("k", now=NOW, **kwargs)
    assert refused.value.field == field


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _stored(keys: InMemoryApiKeys, **kwargs) -> tuple[str, int]:
    secret, key = new_key("k", now=NOW, **kwargs)
    return secret, (await keys.create(key)).id


async def test_with_no_key_anywhere_the_service_is_open_and_a_bootstrap_key_closes_it():
    keys = InMemoryApiKeys()
    assert await Authenticator(keys, None).principal(None) == OPEN_PRINCIPAL
    closed = Authenticator(keys, "boot")
    assert await closed.principal("boot") == ADMIN_PRINCIPAL
    with pytest.raises(Denied) as refused:
        await closed.principal(None)
    assert refused.value.status == 401


async def test_a_verified_key_is_cached_until_its_time_and_a_revocation_counts_after_it():
    keys, clock = InMemoryApiKeys(), Clock()
    secret, key_id = await _stored(keys, user_id="u1")
    auth = Authenticator(keys, "boot", cache_seconds=5, clock=clock)
    assert (await auth.principal(secret)).user_id == "u1"
    await keys.revoke(key_id, NOW)
    assert (await auth.principal(secret)).key_id == key_id  # within the cache's time
    clock.now += 5
    with pytest.raises(Denied):
        await auth.principal(secret)


async def test_last_use_is_written_at_most_once_a_minute():
    keys, clock = InMemoryApiKeys(), Clock()
    secret, key_id = await _stored(keys)
    auth = Authenticator(keys, "boot", clock=clock)
    await auth.principal(secret)
    first = (await keys.get(key_id)).last_used_at
    await keys.touch(key_id, "marker")
    clock.now += 30
    await auth.principal(secret)
    assert (await keys.get(key_id)).last_used_at == "marker" and first is not None
    clock.now += 31
    await auth.principal(secret)
    assert (await keys.get(key_id)).last_used_at != "marker"


async def test_an_expired_key_is_refused():
    keys = InMemoryApiKeys()
    secret, _ = await _stored(keys, expires_at="2001-01-01T00:00:00Z")
    with pytest.raises(Denied):
        await Authenticator(keys, "boot").principal(secret)


async def test_each_key_has_its_own_bucket_and_the_default_rate_applies_without_one():
    keys, clock = InMemoryApiKeys(), Clock()
    slow, _ = await _stored(keys, rate_limit=1)
    fast, _ = await _stored(keys)
    auth = Authenticator(keys, "boot", default_rate=100, clock=clock)
    await auth.principal(slow)
    with pytest.raises(Denied) as limited:
        await auth.principal(slow)
    assert limited.value.status == 429 and (b"retry-after", b"1") in limited.value.headers
    for _ in range(100):
        await auth.principal(fast)
    clock.now += 1
    await auth.principal(slow)


def test_a_bucket_refills_at_its_rate():
    bucket = TokenBucket(2.0, 0.0)
    assert bucket.take(0.0) == 0 and bucket.take(0.0) == 0
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.5) == 0
