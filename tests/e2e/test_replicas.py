"""Stateless replicas: two ``memory-service serve`` processes on one PostgreSQL database share all
state. A write on one is read, searched and streamed on the other; outbox jobs are drained by both,
each once; a replica killed mid-drain loses nothing; forgetting a user on one is seen by the other."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.support.server import ServiceProcess, service_env

JOBS = 2_000


def _env(url: str) -> dict[str, str]:
    # One vector index per process (VECTOR_INDEX=memory): the jobs' effects stay apart, so each
    # replica's count of embedding calls tells which jobs it did (one job per pass: EMBEDDING_BATCH=1).
    return service_env(None, {"STORE": "postgres", "DATABASE_URL": url, "VECTOR_INDEX": "memory",
                              "EMBEDDING_BATCH": "1", "INDEX_VERIFY_SECONDS": "3600"})


@pytest.fixture
def replicas(postgres_url: str, tmp_path: Path) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first = ServiceProcess(_env(postgres_url), log_dir=tmp_path / "a").start()
    try:
        second = ServiceProcess(_env(postgres_url), log_dir=tmp_path / "b").start()
        try:
            yield first, second
        finally:
            second.close()
    finally:
        first.close()


def _until(check, seconds: float = 120.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        time.sleep(0.1)


def _embed_calls(server: ServiceProcess) -> int:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return int(sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("memory_embed_calls_total")))


def _sql(url: str, query: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def test_a_write_on_one_replica_is_read_searched_and_streamed_on_the_other(replicas) -> None:
    a, b = replicas
    with httpx.Client(base_url=a.url, timeout=30) as on_a, httpx.Client(base_url=b.url, timeout=60) as on_b:
        start = on_b.get("/events").json()["nextAfter"]
        streamed: list[dict] = []
        poll = threading.Thread(target=lambda: streamed.append(
            on_b.get("/events", params={"after": start, "wait": 20}).json()))
        poll.start()
        session = on_a.post("/sessions", json={"externalId": "shared"}).json()
        poll.join(timeout=60)
        episode = on_a.post("/episodes", json={"sessionId": session["id"], "userMessage": "the lighthouse keeper",
                                               "aiResponse": "noted"}).json()
        assert on_b.get(f"/episodes/{episode['id']}").json()["userMessage"] == "the lighthouse keeper"
        hits = on_b.get("/episodes/search", params={"q": "lighthouse"}).json()
        assert [h["episode"]["id"] for h in hits["results"]] == [episode["id"]]
        [answer] = streamed
        assert (answer["events"][0]["kind"], answer["events"][0]["recordId"]) == ("sessions", session["id"])


def _enqueue(url: str, count: int) -> None:
    """``count`` episodes with their embedding jobs, written through the store (one transaction)."""
    from adapters.postgres.store import PostgresStore
    from domain import writes
    from domain.models import NewEpisode
    import asyncio

    async def write() -> None:
        store = PostgresStore.open(url)
        try:
            session = await store.uow.run(lambda tx: writes.create_session(tx, f"bulk-{count}", {}))
            news = [NewEpisode(session.id, f"message {n}", f"reply {n}") for n in range(count)]
            await store.uow.run(lambda tx: writes.add_episodes(tx, news))
        finally:
            await store.close()

    asyncio.run(write())


def test_outbox_jobs_are_drained_by_both_replicas_each_exactly_once(replicas, postgres_url: str) -> None:
    a, b = replicas
    before = _embed_calls(a) + _embed_calls(b)
    _enqueue(postgres_url, JOBS)
    _until(lambda: _sql(postgres_url, "SELECT count(*) FROM embedding_outbox")[0][0] == 0, what="the drain")
    by_a, by_b = _embed_calls(a), _embed_calls(b)
    assert by_a + by_b - before == JOBS  # no job twice, none skipped
    assert by_a > 0 and by_b > 0  # both took part
    missing = _sql(postgres_url, "SELECT count(*) FROM episodes e WHERE NOT EXISTS (SELECT 1 FROM embeddings m"
                                 " WHERE m.collection = 'episodes' AND m.ref_id = e.id)")[0][0]
    assert missing == 0


def test_killing_a_replica_mid_drain_loses_no_job(replicas, postgres_url: str) -> None:
    a, b = replicas
    _enqueue(postgres_url, JOBS)
    _until(lambda: _sql(postgres_url, "SELECT count(*) FROM embedding_outbox")[0][0] < JOBS * 0.8, what="a start")
    a.kill()
    # What the killed replica had claimed comes back when its lease ends; everything else the
    # survivor drains now. Then every episode is embedded or still has its job: nothing is lost.
    _until(lambda: _sql(postgres_url, "SELECT count(*) FROM embedding_outbox WHERE next_attempt_at <= %s",
                        (datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),))[0][0] == 0, what="the drain")
    lost = _sql(postgres_url, "SELECT count(*) FROM episodes e WHERE NOT EXISTS (SELECT 1 FROM embeddings m"
                              " WHERE m.collection = 'episodes' AND m.ref_id = e.id) AND NOT EXISTS"
                              " (SELECT 1 FROM embedding_outbox o WHERE o.collection = 'episodes'"
                              " AND o.ref_id = e.id)")[0][0]
    assert lost == 0
    assert httpx.get(f"{b.url}/health", timeout=10).status_code == 200


def test_forgetting_a_user_on_one_replica_is_seen_by_the_other(replicas) -> None:
    a, b = replicas
    with httpx.Client(base_url=a.url, timeout=30) as on_a, httpx.Client(base_url=b.url, timeout=30) as on_b:
        session = on_a.post("/sessions", json={"externalId": "ada-1", "userId": "ada"}).json()
        on_a.post("/episodes", json={"sessionId": session["id"], "userMessage": "ada's secret garden",
                                     "aiResponse": "kept"})
        assert on_b.get(f"/sessions/{session['id']}").status_code == 200
        assert on_a.delete("/users/ada").status_code in (200, 202, 204)
        assert on_b.get(f"/sessions/{session['id']}").status_code == 404
        hits = on_b.get("/episodes/search", params={"q": "garden"}).json()
        assert hits["results"] == []
