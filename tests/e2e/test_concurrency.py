"""Many clients at once on one session and one entity: no duplicate rows, and no
``database is locked`` (or any other failure) reaching a client. A real server process."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from adapters.sqlite.driver import sqlite3
from tests.support.process import integrity_problems, read_only
from tests.support.server import ServiceProcess, service_env

pytestmark = pytest.mark.e2e

CLIENTS = 48
ROUNDS = 10


@pytest.fixture
def server(tmp_path):
    # CLIENTS requests at once must all be admitted: these tests are about SQLite's locks, not
    # admission control (MAX_IN_FLIGHT's default, 32, would refuse the surplus with 503).
    env = service_env(tmp_path / "memory.db", {"MAX_IN_FLIGHT": str(2 * CLIENTS)})
    with ServiceProcess(env, log_dir=tmp_path) as running:
        yield running


async def _all(calls) -> list[httpx.Response]:
    return await asyncio.gather(*calls)


async def _storm(url: str) -> dict[str, list[httpx.Response]]:
    limits = httpx.Limits(max_connections=CLIENTS * 2)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        sid = (await http.post("/sessions", json={"externalId": "shared"})).json()["id"]
        other = (await http.post("/entities", json={"name": "Other", "type": "person"})).json()["id"]
        answers: dict[str, list[httpx.Response]] = {"episodes": [], "entities": [], "relationships": [], "sessions": []}
        for round_ in range(ROUNDS):
            calls, kinds = [], []
            for c in range(CLIENTS):
                kind = ("episodes", "entities", "relationships", "sessions")[c % 4]
                kinds.append(kind)
                if kind == "episodes":
                    calls.append(http.post("/episodes", json={"sessionId": sid, "userMessage": f"r{round_} c{c}",
                                                              "aiResponse": "ok"}))
                elif kind == "entities":  # the same (name, type) from every such client
                    calls.append(http.post("/entities", json={"name": "Ada Lovelace", "type": "person",
                                                              "notes": f"r{round_} c{c}"}))
                elif kind == "relationships":
                    calls.append(_relate(http, other))
                else:  # the same externalId: one 201, the rest 409
                    calls.append(http.post("/sessions", json={"externalId": f"race-{round_}"}))
            for kind, response in zip(kinds, await _all(calls)):
                answers[kind].append(response)
        return answers


async def _relate(http: httpx.AsyncClient, other: int) -> httpx.Response:
    ada = await http.post("/entities", json={"name": "Ada Lovelace", "type": "person"})
    if ada.status_code not in (200, 201):
        return ada
    return await http.post("/relationships", json={"fromId": ada.json()["id"], "toId": other, "label": "knows"})


@pytest.mark.sqlite_only  # its oracle reads the SQLite file
def test_concurrent_writers_and_upserts_make_no_duplicates_and_see_no_lock_errors(server, tmp_path):
    answers = asyncio.run(_storm(server.url))
    everything = [r for responses in answers.values() for r in responses]
    assert not [r.text for r in everything if "locked" in r.text.lower() or "busy" in r.text.lower()]
    assert {r.status_code for r in answers["episodes"]} == {201}
    assert {r.status_code for r in answers["entities"]} <= {200, 201}
    assert [r.status_code for r in answers["entities"]].count(201) <= 1
    assert {r.status_code for r in answers["relationships"]} <= {200, 201}
    assert {r.status_code for r in answers["sessions"]} <= {201, 409}
    assert [r.status_code for r in answers["sessions"]].count(201) == ROUNDS
    assert len({r.json()["id"] for r in answers["entities"]}) == 1
    server.stop()

    db_path = tmp_path / "memory.db"
    with read_only(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM episodes").fetchone()[0] == len(answers["episodes"])
        assert conn.execute("SELECT count(*) FROM entities WHERE name = 'Ada Lovelace'").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM relationships").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == ROUNDS + 1
        # every episode row carries exactly one embedding job or has had it done: none doubled
        jobs = conn.execute("SELECT ref_id, count(*) FROM embedding_outbox WHERE collection = 'episodes'"
                            " AND op = 'upsert' GROUP BY ref_id HAVING count(*) > 1").fetchall()
        assert jobs == []
    assert integrity_problems(db_path) == []
    assert "locked" not in server.stderr().lower()


@pytest.mark.sqlite_only  # another process holding the SQLite file's write lock
def test_writes_wait_out_another_process_holding_the_write_lock(server, tmp_path):
    # A second writer on the same file (a backup script, sqlite3 in a shell) holds the write lock
    # for a while; the server's writes queue behind SQLite's busy timeout instead of failing.
    async def write_all(http: httpx.AsyncClient, sid: int) -> list[httpx.Response]:
        return await asyncio.gather(*[
            http.post("/episodes", json={"sessionId": sid, "userMessage": f"blocked {n}", "aiResponse": "x"})
            for n in range(CLIENTS)])

    async def scenario() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            sid = (await http.post("/sessions", json={"externalId": "blocked"})).json()["id"]
            other = sqlite3.connect(tmp_path / "memory.db", isolation_level=None, check_same_thread=False)
            other.execute("BEGIN IMMEDIATE")
            release = threading.Timer(1.0, lambda: other.execute("COMMIT"))
            release.start()
            try:
                return await write_all(http, sid)
            finally:
                release.join()
                other.close()

    answers = asyncio.run(scenario())
    assert [r.status_code for r in answers] == [201] * CLIENTS, [r.text for r in answers if r.status_code != 201][:3]
