"""The Python client over a proxy that drops answers and answers 503: every write is retried with
its key and stored once (sync and async), against a real server process."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from nexusai_memory_client import NO_RETRIES, AsyncMemoryClient, MemoryClient, MemoryServiceError, NewEpisode, Retries
from tests.support.fault_proxy import FaultProxy

WRITES = 12
DROPS = 6
QUICK = Retries(attempts=4, backoff=0.01, max_delay=1.0)


def _stored(server, session_id: int) -> tuple[list[str], list[str]]:
    with httpx.Client(base_url=server.url, timeout=20) as direct:
        summaries = [s["content"] for s in direct.get(f"/sessions/{session_id}/summaries").json()]
        page = direct.get(f"/sessions/{session_id}/episodes", params={"limit": 1000}).json()
    return summaries, [e["userMessage"] for e in page["items"]]


def test_the_sync_client_stores_each_write_once_when_answers_are_dropped(server):
    with FaultProxy(server.host, server.port, ["drop", "503", "pass"]) as proxy, \
            MemoryClient(proxy.url, retries=QUICK) as memory:
        session = memory.create_session(external_id="flaky")
        for n in range(WRITES):
            memory.create_summary(session_id=session.id, content=f"summary {n}")
            memory.create_episodes(episodes=[NewEpisode(session_id=session.id, user_message=f"batch {n}",
                                                        ai_response="ok")])
        assert proxy.seen.count("drop") >= WRITES  # every write lost at least one answer
    summaries, episodes = _stored(server, session.id)
    assert summaries == [f"summary {n}" for n in range(WRITES)]
    assert episodes == [f"batch {n}" for n in range(WRITES)]


def test_the_async_client_stores_each_write_once_when_answers_are_dropped(server):
    async def scenario() -> int:
        # Concurrent writes share the drops: at most DROPS attempts of one write can be lost.
        async with AsyncMemoryClient(proxy.url, retries=Retries(attempts=DROPS + 2, backoff=0.01)) as memory:
            session = await memory.create_session(external_id="flaky-async")
            await asyncio.gather(*(memory.create_summary(session_id=session.id, content=f"summary {n}")
                                   for n in range(WRITES)))
            return session.id

    with FaultProxy(server.host, server.port, ["drop"] * DROPS + ["pass"] * 10 * WRITES) as proxy:
        session_id = asyncio.run(scenario())
        assert proxy.seen.count("drop") == DROPS
    summaries, _ = _stored(server, session_id)
    assert sorted(summaries) == sorted(f"summary {n}" for n in range(WRITES))


def test_a_client_without_retries_reports_the_lost_answer(server):
    with FaultProxy(server.host, server.port, ["drop"]) as proxy, \
            MemoryClient(proxy.url, retries=NO_RETRIES) as memory:
        with pytest.raises(MemoryServiceError) as lost:
            memory.create_session(external_id="lost")
    assert lost.value.code == "unreachable"


def test_a_write_without_a_key_is_not_retried_once_it_was_sent(server):
    with FaultProxy(server.host, server.port, ["drop", "pass"]) as proxy, \
            MemoryClient(proxy.url, retries=QUICK, idempotency_keys=False) as memory:
        with pytest.raises(MemoryServiceError):
            memory.create_session(external_id="unkeyed")
        assert proxy.seen == ["drop"]  # no second attempt: it could have written twice
