"""GET /events as a long-poll against a real uvicorn process: a waiting poll gets the next change,
holds no admission slot (MAX_IN_FLIGHT=1 here), a client that gives up leaves the server healthy,
and embedding completion shows up in the feed."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from tests.support.server import ServiceProcess, service_env


def test_a_long_poll_gets_the_next_change_without_holding_a_slot(tmp_path: Path) -> None:
    env = service_env(tmp_path / "memory.db", {"MAX_IN_FLIGHT": "1"})
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        start = http.get("/events").json()["nextAfter"]
        answers: list[dict] = []
        poll = threading.Thread(target=lambda: answers.append(
            http.get("/events", params={"after": start, "wait": 20}).json()))
        poll.start()
        created = http.post("/sessions", json={"externalId": "feed"})  # the one slot is free for it
        poll.join(timeout=60)
        assert created.status_code == 201, created.text
        assert not poll.is_alive()
        [answer] = answers
        assert (answer["events"][0]["kind"], answer["events"][0]["recordId"], answer["events"][0]["op"]) == (
            "sessions", created.json()["id"], "created")
        assert answer["nextAfter"] >= answer["events"][0]["seq"] > start


def test_a_client_that_gives_up_leaves_the_feed_working(tmp_path: Path) -> None:
    env = service_env(tmp_path / "memory.db")
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        try:
            httpx.get(f"{server.url}/events", params={"after": 10**12, "wait": 30}, timeout=0.5)
        except httpx.TimeoutException:
            pass  # the client went away while the server waited
        session = http.post("/sessions", json={"externalId": "after-disconnect"}).json()
        episode = http.post("/episodes", json={"sessionId": session["id"], "userMessage": "hello",
                                               "aiResponse": "hi"}).json()
        seen: list[tuple[str, int, str]] = []
        after = 0
        while ("episodes", episode["id"], "embedded") not in seen:  # the worker embeds it: wait for that event
            answer = http.get("/events", params={"after": after, "wait": 20}).json()
            assert answer["events"], "no embedded event within the long-poll's wait"
            seen += [(e["kind"], e["recordId"], e["op"]) for e in answer["events"]]
            after = answer["nextAfter"]
        assert ("episodes", episode["id"], "created") in seen
        assert server.stop() == 0
