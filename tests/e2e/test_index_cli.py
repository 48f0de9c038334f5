"""``memory-service reindex``, ``stats`` and ``doctor`` beside a running service and without one."""

from __future__ import annotations

import pytest

import contextlib
import json
import socket
from collections.abc import Iterator

import httpx

from tests.e2e.test_index_healing import FAST, load
from tests.support.process import wait_for_index
from tests.support.server import ServiceProcess, run_service, service_env

# SQLite only under TEST_STORE=postgres: the CLI beside a service finds it through the SQLite
# file's lock and opens the embedded shards beside that file.
pytestmark = pytest.mark.sqlite_only


def test_reindex_stats_and_doctor_work_while_the_service_runs_and_without_it(tmp_path):
    env = service_env(tmp_path / "memory.db", FAST)
    with ServiceProcess(env, log_dir=tmp_path) as server:
        with httpx.Client(base_url=server.url) as http:
            load(http, 60)
        before = wait_for_index(server.url)["components"]["vectorIndex"]["index"]["collections"]["episodes"]
        beside = {**env, "PORT": str(server.port)}  # the CLI finds the service where the config says

        stats = run_service(["stats"], beside)
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["vectors"]["episodes"] == 60  # not "locked"

        online = run_service(["reindex", "--collection", "episodes"], beside, timeout=120)
        assert online.returncode == 0, online.stdout + online.stderr
        assert "asked the running service" in online.stdout and "episodes=60" in online.stdout
        after = wait_for_index(server.url)["components"]["vectorIndex"]["index"]["collections"]["episodes"]
        assert after["generation"] != before["generation"] and after["points"] == 60

        doctor = run_service(["doctor"], beside)
        assert "episodes: consistent (points 60, rows 60)" in doctor.stdout, doctor.stdout

    offline = run_service(["reindex"], env, timeout=120)
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert "episodes=60" in offline.stdout and "asked the running service" not in offline.stdout
    stats = json.loads(run_service(["stats"], env).stdout)
    assert stats["vectors"]["episodes"] == 60 and stats["index"]["status"].startswith("offline")
    assert stats["bytes"]["embeddings"] > 0


@contextlib.contextmanager
def hung_port() -> Iterator[int]:
    """A real port that accepts connections and never answers (a /health that overran)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield listener.getsockname()[1]


def test_the_cli_beside_a_service_whose_health_does_not_answer_never_opens_its_shards(tmp_path):
    env = service_env(tmp_path / "memory.db", FAST)
    with ServiceProcess(env, log_dir=tmp_path) as server:
        with httpx.Client(base_url=server.url) as http:
            load(http, 30)
        before = wait_for_index(server.url)["components"]["vectorIndex"]["index"]
        assert before["maintaining"]  # the serving process holds the store's maintenance lock
        assert (tmp_path / "memory.db.lock").read_text().strip() == str(server.pid)
        with hung_port() as port:
            beside = {**env, "PORT": str(port)}  # what the CLI reads as the service's /health hangs

            stats = run_service(["stats"], beside)
            assert stats.returncode == 0, stats.stderr
            figures = json.loads(stats.stdout)
            assert "locked" not in stats.stdout and not figures["index"]["status"].startswith("offline")
            assert figures["rows"]["episodes"] == 30
            # The service's shards are never opened here: the store's own figures, said to be so.
            assert "does not answer now" in figures["vectors"]["episodes"]

            doctor = run_service(["doctor"], beside)
            assert doctor.returncode == 0 and "locked" not in doctor.stdout, doctor.stdout + doctor.stderr

            reindex = run_service(["reindex", "--collection", "episodes"], beside, timeout=120)
            assert reindex.returncode == 0, reindex.stdout + reindex.stderr
            assert f"asked the running service (pid {server.pid}) to rebuild: episodes" in reindex.stdout
        after = wait_for_index(server.url)["components"]["vectorIndex"]["index"]["collections"]["episodes"]
        assert after["generation"] != before["collections"]["episodes"]["generation"]
        assert after["points"] == after["rows"] == 30 and after["state"] == "consistent"
        assert "locked" not in server.stderr()
