"""/health tells the truth without waiting on anything, and a poison record cannot block the
others: a hung embedder, a really full disk (a tmpfs), a record the embedder refuses."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.embedding_servers import EmbeddingTestServer
from tests.support.process import wait_for_health
from tests.support.server import ServiceProcess, run_service, service_env

pytestmark = pytest.mark.e2e
DIMENSION = 16


def test_health_answers_at_once_while_the_embedder_hangs(tmp_path):
    # The embedder holds every request for 60 s and the service waits up to 60 s for it; a /health
    # that probed inline would outlast the clients' 10 s timeout below.
    with EmbeddingTestServer("ollama", dimension=DIMENSION, slow_seconds=60.0) as embedder:
        embedder.mode = "slow"
        env = service_env(tmp_path / "memory.db", {"EMBEDDER": "ollama", "OLLAMA_URL": embedder.url,
                                                   "EMBEDDING_DIM": str(DIMENSION), "EMBEDDING_TIMEOUT": "60"})
        with ServiceProcess(env, log_dir=tmp_path) as server:
            with httpx.Client(base_url=server.url, timeout=10.0, limits=httpx.Limits(max_connections=64)) as http:
                http.post("/sessions", json={"externalId": "hung"})
                with ThreadPoolExecutor(max_workers=64) as pool:
                    answers = list(pool.map(lambda _: http.get("/health"), range(256)))
            assert all(a.status_code == 200 for a in answers)
            body = wait_for_health(server.url, lambda b: b["components"]["embedder"]["status"] == "down")
            assert "no answer within" in body["components"]["embedder"]["error"]
            assert body["status"] == "degraded"
            embedder.stop()  # hang up on the held requests, so the worker's pass ends and shutdown is quick


@pytest.fixture
def small_disk(tmp_path):
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.sqlite_only  # the disk under the SQLite file; a database server's disk is its own
def test_a_full_disk_turns_health_down_and_readiness_off(tmp_path, small_disk):
    env = service_env(small_disk / "memory.db", {"QDRANT_PATH": str(tmp_path / "vectors"), "MIN_FREE_DISK_MB": "1"})
    with ServiceProcess(env, log_dir=tmp_path, cwd=tmp_path) as server, httpx.Client(base_url=server.url) as http:
        wait_for_health(server.url, lambda b: b["status"] == "ok")
        assert http.get("/health/ready").status_code == 200
        filler = small_disk / "filler"
        # Unbuffered: a buffered file keeps what the full disk refused and fails again on close.
        with open(filler, "wb", buffering=0) as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
            except OSError:
                pass  # the disk is full
        body = wait_for_health(server.url, lambda b: b["status"] == "down")
        assert body["components"]["disk"]["status"] == "down" and body["ready"] is False
        ready = http.get("/health/ready")
        assert ready.status_code == 503 and ready.headers["retry-after"]
        assert http.get("/health").status_code == 200  # the process still serves: liveness holds
        assert http.get("/health/live").status_code == 200
        filler.unlink()
        wait_for_health(server.url, lambda b: b["status"] == "ok")
        assert http.get("/health/ready").status_code == 200


def _backlog(body: dict) -> dict:
    return body["components"]["embeddingBacklog"]


def test_a_poison_record_is_isolated_dead_lettered_listed_and_retried(tmp_path):
    with EmbeddingTestServer("ollama", dimension=DIMENSION, max_chars=400) as embedder:
        env = service_env(tmp_path / "memory.db", {"EMBEDDER": "ollama", "OLLAMA_URL": embedder.url,
                                                   "EMBEDDING_DIM": str(DIMENSION), "EMBEDDING_MAX_ATTEMPTS": "2"})
        with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url, timeout=30) as http:
            sid = http.post("/sessions", json={"externalId": "poison"}).json()["id"]
            episodes = [{"sessionId": sid, "userMessage": f"note {n} about kiwis", "aiResponse": "ok"}
                        for n in range(40)]
            episodes[13]["userMessage"] = "kiwi " * 200  # over the embedder's context length
            created = http.post("/episodes/batch", json={"episodes": episodes}).json()
            poison_id = created[13]["id"]

            body = wait_for_health(server.url, lambda b: _backlog(b)["dead"] == 1 and _backlog(b)["pending"] == 0)
            assert body["status"] == "degraded" and "dead-lettered" in body["components"]["embeddingBacklog"]["error"]
            hits = http.post("/search", json={"query": "note about kiwis", "limit": 50, "ranker": "vector"}).json()
            assert len(hits["hits"]) == 39 and poison_id not in {h["id"] for h in hits["hits"]}
            metrics = http.get("/metrics").text
            assert "memory_embedding_backlog_dead_jobs 1.0" in metrics
            assert "memory_embedding_dead_lettered_total 1.0" in metrics

            listed = run_service(["dead-letters", "list"], env)
            assert listed.returncode == 0, listed.stderr
            [job] = [json.loads(line) for line in listed.stdout.splitlines()]
            assert (job["collection"], job["refId"], job["attempts"]) == ("episodes", poison_id, 2)
            assert "context length" in job["lastError"]

            embedder.max_chars = None  # e.g. a model with a longer context was deployed
            retried = run_service(["dead-letters", "retry", str(job["id"])], env)
            assert retried.returncode == 0 and "requeued 1" in retried.stdout, retried.stderr
            wait_for_health(server.url, lambda b: _backlog(b)["dead"] == 0 and _backlog(b)["pending"] == 0
                            and b["status"] == "ok")
            hits = http.post("/search", json={"query": "kiwi", "limit": 50, "ranker": "vector"}).json()
            assert poison_id in {h["id"] for h in hits["hits"]}
            assert run_service(["dead-letters", "list"], env).stdout.strip() == "no dead letters"


def test_the_dead_letters_command_needs_ids_or_all(tmp_path):
    env = service_env(tmp_path / "memory.db")
    done = run_service(["dead-letters", "retry"], env)
    assert done.returncode == 2 and "--all" in done.stderr
    assert Path(tmp_path / "memory.db").exists() is False
