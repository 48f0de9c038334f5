"""SIGTERM: stop accepting, finish the requests in flight, drain the worker, close the stores.

To be sure a request really is in flight when the server starts shutting down, each one is sent
by hand with ``Expect: 100-continue``: the server answers ``100 Continue`` only once the app is
reading the body, i.e. the request is inside a handler. The bodies are sent only after the
server has stopped accepting connections, so the handlers finish during the shutdown itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest

from adapters.sqlite.driver import sqlite3
from tests.support.process import wait_for_backlog
from tests.support.server import ServiceProcess, service_env

# SQLite only under TEST_STORE=postgres: a clean close of the SQLite file (its WAL checkpointed, its integrity).
pytestmark = pytest.mark.sqlite_only

IN_FLIGHT = 3
PER_REQUEST = 200
POLL_LIMIT = 600  # connection attempts while waiting for the listener to close (bounded)


def _open_request(host: str, port: int, path: str, body: bytes) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=30)
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n")
    sock.sendall(head.encode())
    interim = sock.recv(4096)
    assert interim.startswith(b"HTTP/1.1 100"), interim
    return sock


def _finish_request(sock: socket.socket, body: bytes) -> tuple[int, bytes]:
    sock.sendall(body)
    raw = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        raw += chunk
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if sep:
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if len(rest) >= length:
                break
    sock.close()
    status = int(raw.split(b" ", 2)[1])
    return status, raw.partition(b"\r\n\r\n")[2]


def _wait_until_refusing(host: str, port: int) -> None:
    for _ in range(POLL_LIMIT):
        try:
            socket.create_connection((host, port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.01)
    raise AssertionError("the server kept accepting connections after SIGTERM")


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "memory.db"


def test_sigterm_finishes_in_flight_requests_and_closes_the_stores_cleanly(db_path):
    server = ServiceProcess(service_env(db_path))  # embedded Qdrant Edge: its shards must close too
    with server:
        session_id = httpx.post(f"{server.url}/sessions", json={"externalId": "shutdown"}).json()["id"]
        bodies = [
            json.dumps({"episodes": [
                {"sessionId": session_id, "userMessage": f"request {r} message {i} about lighthouses",
                 "aiResponse": f"answer {i}"} for i in range(PER_REQUEST)
            ]}).encode()
            for r in range(IN_FLIGHT)
        ]
        in_flight = [_open_request(server.host, server.port, "/episodes/batch", body) for body in bodies]

        os.kill(server.pid, signal.SIGTERM)  # as an orchestrator would
        _wait_until_refusing(server.host, server.port)
        answers = [_finish_request(sock, body) for sock, body in zip(in_flight, bodies)]
        code = server.stop(timeout=30)

    assert [status for status, _ in answers] == [201] * IN_FLIGHT
    assert all(len(json.loads(payload)) == PER_REQUEST for _, payload in answers)
    assert code == 0, server.stderr()
    wal = Path(f"{db_path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL was left for recovery"
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = conn.execute("SELECT count(*) FROM episodes WHERE session_id = ?", (session_id,)).fetchone()[0]
    assert stored == IN_FLIGHT * PER_REQUEST


def test_a_store_shut_down_by_sigterm_reopens_with_its_data_and_vectors(db_path):
    server = ServiceProcess(service_env(db_path))
    with server:
        session_id = httpx.post(f"{server.url}/sessions", json={"externalId": "restart"}).json()["id"]
        created = httpx.post(f"{server.url}/episodes", json={
            "sessionId": session_id, "userMessage": "the lighthouse keeper", "aiResponse": "noted"}).json()
        assert server.stop() == 0, server.stderr()
        server.start()
        assert httpx.get(f"{server.url}/episodes/{created['id']}").status_code == 200
        wait_for_backlog(server.url, pending=0)  # the outbox resumes after restart; bounded
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'memory_vector_points{collection="episodes"} 1.0' in metrics
        assert server.stop() == 0, server.stderr()
