"""kill -9 under write load: every acknowledged write survives, the FTS indexes match their
tables, and the outbox drains so every record ends with exactly one vector.

A real ``memory-service serve`` process on a real SQLite file with the embedded Qdrant Edge
index and the Ollama embedder against an in-test HTTP server. ``CRASH_LOOPS`` (default 3) sets
how many kill points one run goes through; ``.ci/run`` raises it for the long crash loop.
"""

from __future__ import annotations

import os

import httpx
import pytest

from tests.support.embedding_servers import EmbeddingTestServer
from tests.support.process import (
    Acknowledged,
    WriteLoad,
    integrity_problems,
    missing_or_changed,
    service_stats,
    wait_for_backlog,
)
from tests.support.server import ServiceProcess, service_env

# SQLite only under TEST_STORE=postgres: its oracle reads the SQLite file the killed service wrote.
pytestmark = [pytest.mark.e2e, pytest.mark.crashloop, pytest.mark.sqlite_only]

DIMENSION = 16
CRASH_LOOPS = int(os.environ.get("CRASH_LOOPS", "3"))
# Kill after this many acknowledged writes: early (writer warming up), mid-load, and deep into
# a burst; further loops cycle through them with the loop number added so points differ.
KILL_AFTER = (40, 250, 600)


@pytest.fixture
def embedder():
    with EmbeddingTestServer("ollama", dimension=DIMENSION) as server:
        yield server


def _env(tmp_path, embedder: EmbeddingTestServer) -> dict[str, str]:
    return service_env(tmp_path / "memory.db", {
        "EMBEDDER": "ollama", "OLLAMA_URL": embedder.url, "EMBEDDING_DIM": str(DIMENSION),
        "EMBEDDING_TIMEOUT": "5",
    })


def test_every_acknowledged_write_survives_kill_9_and_is_embedded_exactly_once(tmp_path, embedder):
    env = _env(tmp_path, embedder)
    db_path = tmp_path / "memory.db"
    everything = Acknowledged()
    figures: list[str] = []
    server = ServiceProcess(env, log_dir=tmp_path)
    server.start()
    try:
        session_id = httpx.post(f"{server.url}/sessions", json={"externalId": "crash"}).json()["id"]
        for loop in range(CRASH_LOOPS):
            kill_after = KILL_AFTER[loop % len(KILL_AFTER)] + 7 * (loop // len(KILL_AFTER))
            with WriteLoad(server.url, session_id, threads=8, tag=f"loop{loop}") as load:
                load.wait_for(kill_after)
                assert server.kill() == -9
                acknowledged = load.stop()
            assert acknowledged.refused == [], acknowledged.refused[:5]
            everything.merge(acknowledged)
            # Checked against the file with the server down: nothing can paper over a loss.
            lost = missing_or_changed(db_path, everything)
            figures.append(f"kill {loop + 1}: {acknowledged.total()} acknowledged this run, "
                           f"{everything.total()} in all, {len(lost)} missing, {acknowledged.unanswered} cut off")
            assert lost == [], lost[:5]
            assert integrity_problems(db_path) == []
            server.start()
        wait_for_backlog(server.url, pending=0)
        # uvicorn re-raises the SIGTERM it handled once shutdown is complete, so -15 is a clean exit.
        assert server.stop() in (0, -15)
    finally:
        server.close()
        print("\n".join(figures))
        print(f"total acknowledged: {len(everything.episodes)} episodes, {len(everything.entities)} entities, "
              f"{len(everything.relationships)} relationships")

    assert missing_or_changed(db_path, everything) == []
    assert integrity_problems(db_path) == []
    stats = service_stats(env)
    rows, vectors = stats["rows"], stats["vectors"]
    assert rows["episodes"] >= len(everything.episodes)
    # Point ids are row ids, so equal counts mean one vector per record, none left over.
    assert vectors["episodes"] == rows["episodes"]
    assert vectors["entities"] == rows["entities"]
    assert stats["backlog"]["pending"] == 0
