"""The out-of-the-box configuration: no EMBEDDER, no EMBEDDING_DIM, nothing else running.

The server must embed in process with the packaged all-MiniLM-L6-v2 and answer a query by
meaning, and it must do so without torch: the server runs with a ``torch`` and a
``sentence_transformers`` on its path that refuse to import.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.process import wait_for_backlog, wait_for_health
from tests.support.server import ServiceProcess, service_env

# SQLite only under TEST_STORE=postgres: the embedded default exactly as `make run` serves it.
pytestmark = pytest.mark.sqlite_only

PIXEL = "I adopted a grey kitten named Pixel"
OTHERS = [
    ("I moved to Lisbon last spring", "Lisbon is lovely."),
    ("My favourite food is ramen", "Noted: ramen."),
    ("I am learning to play the cello", "Good luck with the practice!"),
    ("We are planning a trip to Kyoto in April", "April is cherry blossom season."),
]


@pytest.fixture
def no_torch(tmp_path):
    """A directory that, first on PYTHONPATH, makes any import of torch fail loudly."""
    shim = tmp_path / "no-torch"
    for name in ("torch", "sentence_transformers"):
        (shim / name).mkdir(parents=True)
        (shim / name / "__init__.py").write_text(f"raise ImportError('{name} must not be imported by the default')\n")
    return shim


@pytest.fixture
def default_server(tmp_path, no_torch):
    env = service_env(tmp_path / "memory.db", {"LOG_LEVEL": "info", "PYTHONPATH": str(no_torch)})
    for variable in ("EMBEDDER", "EMBEDDING_DIM", "EMBEDDING_MODEL"):
        env.pop(variable, None)
    with ServiceProcess(env, log_dir=tmp_path) as server:
        yield server


def test_a_fresh_default_server_finds_a_new_pet_cat_by_meaning(default_server):
    with httpx.Client(base_url=default_server.url, timeout=30.0) as client:
        session = client.post("/sessions", json={"externalId": "pets"}).json()["id"]
        for user, ai in [(PIXEL, "Congratulations! Pixel is a lovely name."), *OTHERS]:
            assert client.post("/episodes", json={"sessionId": session, "userMessage": user,
                                                  "aiResponse": ai}).status_code == 201
        wait_for_backlog(default_server.url, pending=0)
        health = wait_for_health(default_server.url, lambda body: body["status"] == "ok")
        answer = client.post("/search", json={"query": "my new pet cat", "sessionId": session, "limit": 3}).json()

    assert health["status"] == "ok"
    embedder = health["components"]["embedder"]
    assert {k: embedder[k] for k in ("status", "reachable", "model", "dimension", "kind")} == {
        "status": "ok", "reachable": True, "model": "all-MiniLM-L6-v2", "dimension": 384, "kind": "local"}
    assert answer["degraded"] is False
    best = answer["hits"][0]
    assert best["episode"]["userMessage"] == PIXEL
    # Not one word of the query is in the memory: only the vector leg can have found it.
    assert best["vector"]["rank"] == 1 and best["keyword"] is None


def test_start_up_logs_one_line_per_component_and_the_model_once_loaded(default_server):
    wait_for_health(default_server.url, lambda body: body["status"] == "ok")
    default_server.stop()
    log = default_server.stderr()
    assert "store: sqlite" in log and "ok: 0 sessions, 0 episodes" in log
    assert "vector index: edge" in log and "model local:all-MiniLM-L6-v2 (384-d" in log
    assert "embedder: local model all-MiniLM-L6-v2 loaded (384-d, numpy runtime)" in log
    assert "WARNING" not in log
