"""Keyed writes over a real uvicorn process: a retry after a lost answer never writes twice.

A write is sent with an ``Idempotency-Key`` over a raw socket that is cut at a random point (before
the request is complete, right after it, or while the service works on it); the retry with the same
key then leaves exactly one record. A ``kill -9`` after the commit (the answer never read), then a
retry after the restart, is answered with the stored answer.
"""

from __future__ import annotations

import random
import socket
import sqlite3
import struct
import time
import uuid

import httpx
import pytest

from tests.support.server import ServiceProcess

GUARD = 20.0  # seconds: a hang guard only, never what a test measures
KILLS = 100
ROUTES = ["/episodes", "/summaries"]


def _body(route: str, session_id: int, text: str) -> dict:
    if route == "/episodes":
        return {"sessionId": session_id, "userMessage": text, "aiResponse": "ok"}
    return {"sessionId": session_id, "content": text}


def _texts(client: httpx.Client, route: str, session_id: int) -> list[str]:
    if route == "/episodes":
        page = client.get(f"/sessions/{session_id}/episodes", params={"limit": 1000}).json()
        return [e["userMessage"] for e in page["items"]]
    return [s["content"] for s in client.get(f"/sessions/{session_id}/summaries").json()]


def _raw_request(route: str, body: bytes, key: str) -> bytes:
    head = (f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nIdempotency-Key: {key}\r\n\r\n")
    return head.encode() + body


def _cut(server: ServiceProcess, request: bytes, rng: random.Random) -> None:
    """Send ``request`` (all of it, or a random part) and reset the connection at a random moment,
    never reading the answer."""
    with socket.create_connection((server.host, server.port), timeout=GUARD) as sock:
        point = rng.random()
        if point < 0.2:
            sock.sendall(request[:rng.randrange(1, len(request))])  # cut before the request is whole
        else:
            sock.sendall(request)
            if point > 0.4:
                time.sleep(rng.uniform(0, 0.02))  # cut while the service reads, writes or answers
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN


@pytest.mark.parametrize("route", ROUTES)
def test_the_same_post_sent_twice_with_one_key_stores_one_record_and_answers_alike(server, route):
    with httpx.Client(base_url=server.url, timeout=GUARD) as client:
        session_id = client.post("/sessions", json={"externalId": "twice"}).json()["id"]
        headers, body = {"Idempotency-Key": str(uuid.uuid4())}, _body(route, session_id, "once")
        first, again = client.post(route, json=body, headers=headers), client.post(route, json=body, headers=headers)
        assert (first.status_code, again.status_code) == (201, 201)
        assert again.content == first.content and again.headers["Idempotent-Replayed"] == "true"
        assert _texts(client, route, session_id) == ["once"]


@pytest.mark.parametrize("route", ROUTES)
def test_connections_cut_at_random_points_then_retried_with_their_key_store_each_write_once(server, route):
    rng = random.Random(31)
    with httpx.Client(base_url=server.url, timeout=GUARD) as client:
        session_id = client.post("/sessions", json={"externalId": "cut"}).json()["id"]
        for n in range(KILLS):
            key, body = str(uuid.uuid4()), _body(route, session_id, f"write {n}")
            _cut(server, _raw_request(route, httpx.Request("POST", "/", json=body).content, key), rng)
            retry = client.post(route, json=body, headers={"Idempotency-Key": key})
            assert retry.status_code == 201, retry.text
        texts = _texts(client, route, session_id)
    assert sorted(texts) == sorted(f"write {n}" for n in range(KILLS))


def _stored_answer(db_path, key: str) -> bytes | None:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=GUARD)
    try:
        row = conn.execute("SELECT body FROM idempotency_keys WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError:  # the schema is not there yet
        return None
    finally:
        conn.close()
    return None if row is None else bytes(row[0])


@pytest.mark.sqlite_only  # its oracle reads the answer stored in the SQLite file
@pytest.mark.parametrize("route", ROUTES)
def test_a_kill_9_after_the_commit_then_a_retry_after_restart_returns_the_original_answer(server, db_path, route):
    with httpx.Client(base_url=server.url, timeout=GUARD) as client:
        session_id = client.post("/sessions", json={"externalId": "crash"}).json()["id"]
    key, body = str(uuid.uuid4()), _body(route, session_id, "before the crash")
    with socket.create_connection((server.host, server.port), timeout=GUARD) as sock:
        sock.sendall(_raw_request(route, httpx.Request("POST", "/", json=body).content, key))
        deadline, stored = time.monotonic() + GUARD, None
        while stored is None and time.monotonic() < deadline:
            stored = _stored_answer(db_path, key)  # committed: the write and its answer together
        assert stored is not None, "the keyed write was never committed"
        server.kill()  # kill -9; the answer is never read
    server.start()
    with httpx.Client(base_url=server.url, timeout=GUARD) as client:
        retry = client.post(route, json=body, headers={"Idempotency-Key": key})
        assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true"
        assert retry.content == stored
        assert _texts(client, route, session_id) == ["before the crash"]
