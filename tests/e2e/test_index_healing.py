"""The vector index heals itself: a real server, real SQLite and real Qdrant Edge shards, with
the damage done for real (deleted and truncated files, a foreign lock, a full volume, kill -9).
Every test ends the same way, with no manual step: one point per row and search not degraded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.process import index_settled, read_only, wait_for_health, wait_for_index
from tests.support.server import ServiceProcess, service_env

# SQLite only under TEST_STORE=postgres: the oracle reads the index manifest from the SQLite file.
pytestmark = pytest.mark.sqlite_only

ROOT = Path(__file__).resolve().parents[2]
# Small thresholds so that builds happen on small data.
FAST = {"HEALTH_INTERVAL": "0.2", "INDEX_CHECK_SECONDS": "0.2", "INDEX_VERIFY_SECONDS": "1", "INDEX_OPTIMIZE_EVERY": "40",
        "INDEX_INLINE_BUILD_POINTS": "40", "LOG_LEVEL": "info"}


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return service_env(tmp_path / "memory.db", {**FAST, **extra})


def load(http: httpx.Client, episodes: int, batch: int = 50, start: int = 0) -> None:
    sid = http.post("/sessions", json={"externalId": f"s{start}"}).json()["id"]
    for first in range(start, start + episodes, batch):
        body = {"episodes": [{"sessionId": sid, "userMessage": f"kiwi note {n}", "aiResponse": f"reply {n}"}
                             for n in range(first, min(first + batch, start + episodes))]}
        assert http.post("/episodes/batch", json=body).status_code == 201


def assert_healed(server: ServiceProcess, rows: int) -> dict:
    body = wait_for_index(server.url)
    assert body["components"]["vectorIndex"]["index"]["collections"]["episodes"]["points"] == rows
    with httpx.Client(base_url=server.url) as http:
        search = http.post("/search", json={"query": "kiwi note", "limit": 5}).json()
    assert search["degraded"] is False and len(search["hits"]) == 5
    return body


def seeded(tmp_path: Path, episodes: int = 120, **extra: str) -> tuple[dict[str, str], Path]:
    """A stopped server's files holding ``episodes`` embedded episodes; returns its env and the
    active episodes shard."""
    env = env_for(tmp_path, **extra)
    with ServiceProcess(env, log_dir=tmp_path) as server:
        with httpx.Client(base_url=server.url) as http:
            load(http, episodes)
        assert_healed(server, episodes)
    # From the manifest once stopped: a maintenance build may have switched generations since.
    with read_only(tmp_path / "memory.db") as conn:
        [physical] = conn.execute("SELECT physical FROM index_generations"
                                  " WHERE collection = 'episodes' AND state = 'active'").fetchone()
    return env, tmp_path / "memory.db.qdrant" / physical


@pytest.mark.parametrize("change", [{"EMBEDDER": "fake"}], ids=["model-same-dimension"])
def test_a_changed_embedding_model_starts_at_once_and_rebuilds_in_the_background(tmp_path, change):
    # The dimension change is test_server_process.py's restart with another EMBEDDING_DIM.
    env, _ = seeded(tmp_path)
    with ServiceProcess({**env, **change}, log_dir=tmp_path) as server:
        with httpx.Client(base_url=server.url) as http:
            assert http.post("/episodes", json={"sessionId": 1, "userMessage": "kiwi late", "aiResponse": "x"}
                             ).status_code == 201
            early = http.post("/search", json={"query": "kiwi"}).json()
        if early["degraded"]:  # the rebuild was still running: the answer says why
            assert any("embedding model changed" in w for w in early["warnings"]), early
        body = assert_healed(server, 121)
    model = body["components"]["vectorIndex"]["index"]["collections"]["episodes"]["model"]
    assert model.startswith(("fake:" if "EMBEDDER" in change else "hash:")) and ("32-d" in model) == ("EMBEDDING_DIM" in change)


@pytest.mark.parametrize("damage", ["lost", "partly-lost", "corrupted"])
def test_a_damaged_shard_is_set_aside_and_rebuilt_while_the_service_runs(tmp_path, damage):
    env, shard = seeded(tmp_path)
    if damage == "lost":
        subprocess.run(["rm", "-rf", str(shard)], check=True)
    elif damage == "partly-lost":
        for segment in (shard / "segments").iterdir():
            subprocess.run(["rm", "-rf", str(segment / "vector_storage")], check=True)
    else:
        for path in shard.rglob("*"):
            if path.is_file():
                path.write_bytes(b"\xde\xad" * max(1, path.stat().st_size // 4))
    with ServiceProcess(env, log_dir=tmp_path) as server:
        assert_healed(server, 120)
    aside = tmp_path / "memory.db.qdrant" / ".aside"
    if damage == "corrupted":  # kept for inspection, not deleted
        assert [p.name.split("-")[0] for p in aside.iterdir()] == ["episodes"]


HOLDER = """
import sys, time
import qdrant_edge as qe
shard = qe.EdgeShard.load(sys.argv[1])
print("holding", flush=True)
time.sleep(3600)
"""


def test_a_shard_locked_by_a_stray_process_is_set_aside_and_rebuilt(tmp_path):
    env, shard = seeded(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(shard)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with ServiceProcess(env, log_dir=tmp_path) as server:
            assert_healed(server, 120)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_maintenance_builds_never_degrade_search(tmp_path):
    env = env_for(tmp_path)
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url) as http:
        sid = http.post("/sessions", json={"externalId": "bulk"}).json()["id"]
        degraded = []
        for first in range(0, 600, 50):
            http.post("/episodes/batch", json={"episodes": [
                {"sessionId": sid, "userMessage": f"kiwi note {n}", "aiResponse": "x"} for n in range(first, first + 50)]})
            answer = http.post("/search", json={"query": "kiwi note"}).json()
            degraded += [w for w in answer["warnings"] if "index" in w]
        body = assert_healed(server, 600)
    assert degraded == []
    assert body["components"]["vectorIndex"]["index"]["builds"] >= 1  # builds did happen meanwhile


def build_children(tmp_path: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                line = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "adapters.qdrant.edge_build" in line and str(tmp_path) in line:
                found.append(int(proc.name))
    return found


def building(body: dict) -> bool:
    return any(c["building"] for c in body["components"]["vectorIndex"]["index"]["collections"].values())


def test_kill_9_during_builds_and_switches_converges_without_orphans(tmp_path):
    env = env_for(tmp_path)
    server = ServiceProcess(env, log_dir=tmp_path)
    loaded, builds_seen = 0, 0
    try:
        for round_ in range(4):
            # Round 1 changes the model, so a build is certainly running when the kill comes;
            # the others kill during maintenance builds (or the switch right after one).
            server.env = env if round_ == 0 else {**env, "EMBEDDER": "fake"}
            server.start()
            with httpx.Client(base_url=server.url) as http:
                load(http, 150, start=loaded)
                loaded += 150
                body = wait_for_health(server.url, lambda b: building(b) or index_settled(b), timeout=60)
                builds_seen += building(body)
                time.sleep(0.05 * round_)
            server.kill()
            gone = time.monotonic() + 30
            while build_children(tmp_path) and time.monotonic() < gone:
                time.sleep(0.05)
            assert build_children(tmp_path) == [], "a build child outlived kill -9 of its service"
        server.start()
        assert_healed(server, loaded)
    finally:
        server.stop()
    assert builds_seen >= 1


@pytest.fixture
def small_volume(tmp_path):
    mount = tmp_path / "index-volume"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_low_index_volume_holds_vector_writes_in_the_outbox_until_space_returns(tmp_path, small_volume):
    env = env_for(tmp_path, QDRANT_PATH=str(small_volume / "shards"), INDEX_DISK_RESERVE_MB="16")
    with ServiceProcess(env, log_dir=tmp_path) as server, httpx.Client(base_url=server.url) as http:
        load(http, 20)
        assert_healed(server, 20)
        stats = os.statvfs(small_volume)
        filler = small_volume / "filler"
        free = stats.f_bavail * stats.f_frsize
        with open(filler, "wb") as out:  # leave less than the reserve
            out.write(b"\0" * max(0, free - 8 * 2**20))
        load(http, 20, start=20)
        body = wait_for_health(server.url, lambda b: b["components"]["vectorIndex"]["index"]["diskLow"] is not None
                               and b["components"]["embeddingBacklog"]["pending"] > 0)
        assert body["components"]["vectorIndex"]["status"] == "degraded"
        assert "disk low" in body["components"]["vectorIndex"]["index"]["diskLow"]
        assert http.get("/episodes/search", params={"q": "kiwi"}).status_code == 200  # SQLite goes on
        filler.unlink()
        assert_healed(server, 40)
