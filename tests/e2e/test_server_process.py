"""The real server: `memory-service serve` in a subprocess, over HTTP, stopped and restarted on
the same files; and the start-up failures a misconfigured deployment sees."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from tests.support.process import backlog_pending, fresh_health, wait_for_index
from tests.support.server import ServiceProcess, run_service, service_env

pytestmark = pytest.mark.e2e

DRAIN_BOUND = 60.0  # seconds: a bound on waiting, not a speed requirement


def wait_for_empty_backlog(http: httpx.Client) -> dict:
    """Poll /health until the embedding outbox is empty; fail (with the last health) at the bound."""
    return fresh_health(http, lambda body: backlog_pending(body) == 0, DRAIN_BOUND)


def seed(http: httpx.Client) -> dict:
    """A small memory through every resource; returns what a restart must give back."""
    session = http.post("/sessions", json={"externalId": "e2e-conv", "metadata": {"user": "u1"}})
    assert session.status_code == 201, session.text
    sid = session.json()["id"]
    texts = [("Where should we go in April?", "Lisbon is lovely in April."),
             ("What food do I like?", "You told me you love ramen."),
             ("Remind me of the cat's name", "Your cat is called Miso.")]
    episodes = []
    for user, ai in texts:
        response = http.post("/episodes", json={"sessionId": sid, "userMessage": user, "aiResponse": ai,
                                                "tokenCount": 12, "metadata": {"turn": len(episodes)}})
        assert response.status_code == 201, response.text
        episodes.append(response.json())
    alice = http.post("/entities", json={"name": "Alice", "type": "person", "notes": "the user"})
    miso = http.post("/entities", json={"name": "Miso", "type": "pet", "notes": "a cat"})
    assert (alice.status_code, miso.status_code) == (201, 201)
    edge = http.post("/relationships", json={"fromId": alice.json()["id"], "toId": miso.json()["id"],
                                             "label": "owns"})
    assert edge.status_code == 201, edge.text
    summary = http.post("/summaries", json={"sessionId": sid, "content": "Travel, food and a cat named Miso.",
                                            "episodeCount": 3})
    assert summary.status_code == 201, summary.text
    return {"session": session.json(), "episodes": episodes, "alice": alice.json(), "miso": miso.json(),
            "edge": edge.json(), "summary": summary.json()}


def assert_memory_is_there(http: httpx.Client, seeded: dict) -> None:
    sid = seeded["session"]["id"]
    assert http.get(f"/sessions/{sid}").json() == seeded["session"]
    assert http.get("/sessions/by-external/e2e-conv").json()["id"] == sid
    page = http.get(f"/sessions/{sid}/episodes").json()
    assert page["total"] == 3
    assert page["items"] == seeded["episodes"]
    assert http.get(f"/entities/{seeded['alice']['id']}").json() == seeded["alice"]
    assert http.get(f"/entities/{seeded['miso']['id']}/relationships", params={"direction": "in"}).json() == [
        seeded["edge"]]
    assert http.get(f"/summaries/{seeded['summary']['id']}").json() == seeded["summary"]
    ramen = http.get("/episodes/search", params={"q": "ramen"}).json()["results"]
    assert [hit["episode"]["id"] for hit in ramen] == [seeded["episodes"][1]["id"]]
    lisbon = http.get("/episodes/search", params={"q": "lisbon april", "sessionId": sid}).json()["results"]
    assert [hit["episode"]["id"] for hit in lisbon] == [seeded["episodes"][0]["id"]]


def vector_hit_ids(http: httpx.Client, query: str, sources: list[str]) -> list[int]:
    # minScore 0: every point the index holds, relevant or not (the default floor would cut the rest).
    response = http.post("/search", json={"query": query, "limit": 10, "sources": sources, "ranker": "vector",
                                          "minScore": 0})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degraded"] is False, body
    return [hit["id"] for hit in body["hits"] if hit["vector"] is not None]


@pytest.mark.sqlite_only  # the embedded index's directory beside the SQLite file
def test_the_server_keeps_everything_across_a_graceful_restart(server, db_path):
    assert Path(f"{db_path}.qdrant").is_dir()  # the embedded Qdrant Edge default, beside the database
    with httpx.Client(base_url=server.url, timeout=30) as http:
        health = fresh_health(http, lambda body: body["status"] == "ok")
        assert health["components"]["vectorIndex"]["kind"] == "edge"
        assert health["components"]["embedder"]["dimension"] == 64
        seeded = seed(http)
        assert_memory_is_there(http, seeded)
        wait_for_empty_backlog(http)
        episode_ids = {e["id"] for e in seeded["episodes"]}
        assert set(vector_hit_ids(http, "Lisbon is lovely in April.", ["episodes"])) == episode_ids
        assert vector_hit_ids(http, "Travel, food and a cat named Miso.", ["summaries"]) == [seeded["summary"]["id"]]

    code = server.stop()
    assert code in (0, -signal.SIGTERM), server.stderr()
    assert "Traceback" not in server.stderr()
    assert not server.running

    server.start()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert_memory_is_there(http, seeded)
        health = wait_for_empty_backlog(http)
        assert health["status"] == "ok", health
        # The vectors survived in the shards, not only the rows in SQLite.
        assert set(vector_hit_ids(http, "Lisbon is lovely in April.", ["episodes"])) == episode_ids
        entity_hits = vector_hit_ids(http, "Miso", ["entities"])
        assert set(entity_hits) == {seeded["alice"]["id"], seeded["miso"]["id"]}
        # Writes go on where they left off.
        later = http.post("/episodes", json={"sessionId": seeded["session"]["id"], "userMessage": "Back again",
                                             "aiResponse": "Welcome back"})
        assert later.status_code == 201
        assert later.json()["id"] > max(episode_ids)
        assert http.get(f"/sessions/{seeded['session']['id']}/episodes").json()["total"] == 4


def test_deletes_survive_a_restart(server):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        seeded = seed(http)
        gone = seeded["episodes"][1]["id"]
        assert http.delete(f"/episodes/{gone}").status_code == 204
        assert http.request("DELETE", "/relationships", json={
            "fromId": seeded["alice"]["id"], "toId": seeded["miso"]["id"], "label": "owns"}).status_code == 204
        wait_for_empty_backlog(http)
    server.stop()
    server.start()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get(f"/episodes/{gone}").status_code == 404
        assert http.get("/episodes/search", params={"q": "ramen"}).json()["results"] == []
        assert http.get(f"/entities/{seeded['alice']['id']}/relationships").json() == []
        assert gone not in vector_hit_ids(http, "You told me you love ramen.", ["episodes"])


def test_the_server_comes_back_after_kill_minus_nine(server):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        seeded = seed(http)
    assert server.kill() == -signal.SIGKILL
    server.start()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert_memory_is_there(http, seeded)
        wait_for_empty_backlog(http)


def test_errors_over_real_http_have_the_one_shape(server):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        malformed = http.post("/sessions", content=b"{nope", headers={"content-type": "application/json"})
        too_big = http.post("/sessions", content=b"x" * (1_048_576 + 10), headers={"content-type": "application/json"})
        unknown = http.get("/no/such/route")
        bad_id = http.get(f"/sessions/{2**64}")
    for response, status in ((malformed, 400), (too_big, 413), (unknown, 404), (bad_id, 400)):
        assert response.status_code == status, response.text
        assert set(response.json()) == {"code", "message", "field", "status"}
        assert "Traceback" not in response.text
    assert "Traceback" not in server.stderr()


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.sqlite_only  # the SQLite store's own setting
def test_a_missing_sqlite_path_exits_2_with_one_line_naming_it():
    result = run_service(["serve"], service_env(None))
    assert result.returncode == 2, result
    assert "SQLITE_PATH" in one_line(result.stderr)


@pytest.mark.sqlite_only  # the SQLite store's own setting
def test_an_empty_sqlite_path_is_as_missing(tmp_path):
    result = run_service(["serve"], service_env(None, {"SQLITE_PATH": "  "}))
    assert result.returncode == 2, result
    assert "SQLITE_PATH" in one_line(result.stderr)


def test_an_unknown_embedder_exits_2_naming_embedder(tmp_path):
    result = run_service(["serve"], service_env(tmp_path / "memory.db", {"EMBEDDER": "telepathy"}))
    assert result.returncode == 2, result
    line = one_line(result.stderr)
    assert "EMBEDDER" in line and "telepathy" in line
    assert not (tmp_path / "memory.db").exists()  # nothing was created before the check


@pytest.mark.parametrize(("variable", "value"), [("EMBEDDING_DIM", "wide"), ("PORT", "99999"),
                                                 ("DEFAULT_RANKER", "coin-flip"), ("LOG_LEVEL", "chatty")])
def test_other_bad_settings_exit_2_naming_the_variable(tmp_path, variable, value):
    result = run_service(["serve"], service_env(tmp_path / "memory.db", {variable: value}))
    assert result.returncode == 2, result
    assert variable in one_line(result.stderr)


def test_a_restart_with_another_embedding_dim_starts_and_rebuilds_the_index(server_env, tmp_path):
    # Not a configuration error any more: the index manager builds a generation at the new size
    # from SQLite in the background while the service serves (docs/concepts.md: "The index is a cache").
    with ServiceProcess(server_env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url) as http:
        seeded = seed(http)
        wait_for_empty_backlog(http)
    with ServiceProcess({**server_env, "EMBEDDING_DIM": "32"}, log_dir=tmp_path) as server:
        body = wait_for_index(server.url)
        episodes = body["components"]["vectorIndex"]["index"]["collections"]["episodes"]
        assert "32-d" in episodes["model"] and episodes["points"] == episodes["rows"] > 0
        with httpx.Client(base_url=server.url) as http:
            assert_memory_is_there(http, seeded)
            assert http.post("/search", json={"query": "ramen"}).json()["degraded"] is False