"""What a real server writes to stderr: with LOG_FORMAT=json every line is one JSON object
(uvicorn's own lines included) stamped ISO-8601 UTC with milliseconds, and httpx's line per
embedder call shows only at LOG_LEVEL=debug. Start-up names each component and warns when the
embedder is unreachable."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest

from tests.support.embedding_servers import EmbeddingTestServer
from tests.support.process import wait_for_backlog
from tests.support.server import ServiceProcess, service_env

DIMENSION = 16
UTC_MILLISECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def ollama():
    with EmbeddingTestServer("ollama", dimension=DIMENSION) as server:
        yield server


def _json_run(tmp_path, ollama, level: str) -> list[dict]:
    env = service_env(tmp_path / f"{level}.db", {"EMBEDDER": "ollama", "OLLAMA_URL": ollama.url,
                                                "EMBEDDING_DIM": str(DIMENSION), "LOG_FORMAT": "json",
                                                "LOG_LEVEL": level})
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url) as http:
        session = http.post("/sessions", json={"externalId": "logs"}).json()["id"]
        http.post("/episodes", json={"sessionId": session, "userMessage": "hello", "aiResponse": "hi"})
        wait_for_backlog(server.url, pending=0)
        server.stop()
        lines = server.stderr().splitlines()
    assert lines, "the server wrote nothing"
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
    return entries


def test_json_logs_are_json_on_every_line_uvicorn_included_with_utc_milliseconds(tmp_path, ollama):
    entries = _json_run(tmp_path, ollama, "info")
    assert all(UTC_MILLISECONDS.match(entry["time"]) for entry in entries), [e["time"] for e in entries]
    messages = {(entry["logger"], entry["message"]) for entry in entries}
    assert ("uvicorn.error", "Application startup complete.") in messages
    assert any(logger == "nexusai.startup" and message.startswith("store: ") for logger, message in messages)
    assert any(logger == "nexusai.startup" and message.startswith("embedder: ollama") and "reachable" in message
               for logger, message in messages)
    assert not any(entry["logger"].startswith("httpx") for entry in entries)


def test_debug_logs_show_httpx_calls(tmp_path, ollama):
    entries = _json_run(tmp_path, ollama, "debug")
    assert any(entry["logger"] == "httpx" and "/api/embed" in entry["message"] for entry in entries)


def test_start_up_warns_that_search_is_degraded_when_the_embedder_is_unreachable(tmp_path, ollama):
    ollama.mode = "down"
    env = service_env(tmp_path / "memory.db", {"EMBEDDER": "ollama", "OLLAMA_URL": ollama.url,
                                               "EMBEDDING_DIM": str(DIMENSION), "LOG_LEVEL": "info"})
    with ServiceProcess(env, log_dir=tmp_path) as server:
        server_log = ""
        with httpx.Client(base_url=server.url) as http:
            for _ in range(600):  # bounded (30 s): the warning follows the first probe, which fails fast
                server_log = server.stderr()
                if "WARNING nexusai.startup" in server_log:
                    break
                http.get("/health")
                time.sleep(0.05)
    warning = next(line for line in server_log.splitlines() if "WARNING nexusai.startup" in line)
    assert f"embedder: ollama ({ollama.url}) model nomic-embed-text is unreachable" in warning
    assert "keyword-only (degraded)" in warning
