"""Qdrant Edge builds large shards in a child process, as a new collection beside the live one:
the service never freezes, the live collection never goes offline, and the child never outlives
the service."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import qdrant_edge as qe

from adapters.qdrant.edge import QdrantEdgeIndex
from adapters.qdrant.edge_build import BUILD_NICENESS, MODULE, SEARCH_THREADS
from domain.errors import VectorIndexError
from domain.vectors import PointBatch, VectorPoint, encode_vector, normalized

DIM = 16
ROOT = Path(__file__).resolve().parents[2]


def points(n: int, seed: int = 7) -> list[VectorPoint]:
    rnd = random.Random(seed)
    return [VectorPoint(i, [rnd.uniform(-1, 1) for _ in range(DIM)], {"sessionId": 1, "createdAt": "2026-01-01T00:00:00.000Z"})
            for i in range(1, n + 1)]


async def stream(data: list[VectorPoint], size: int = 100, pause: asyncio.Event | None = None):
    for start in range(0, len(data), size):
        if pause is not None and start:
            await pause.wait()  # the build stays in progress until the test has looked
        chunk = data[start:start + size]
        yield PointBatch([p.id for p in chunk], [p.payload for p in chunk],
                         b"".join(encode_vector(p.vector) for p in chunk), DIM)


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            status = Path(f"/proc/{pid}/stat").read_text().split()[2]
            if status == "Z":
                return True  # dead, only not reaped yet
        except (OSError, IndexError):
            return True
        time.sleep(0.05)
    return False


async def test_a_build_runs_in_a_child_process_and_yields_an_indexed_shard(tmp_path):
    index = QdrantEdgeIndex(tmp_path / "vectors", optimize_every=10**9, inline_optimize_points=10)
    data = points(300)
    pause = asyncio.Event()
    try:
        build = asyncio.ensure_future(index.build_collection("episodes-g2", DIM, stream(data, pause=pause)))
        while "episodes-g2" not in index._builds.children:
            await asyncio.sleep(0.01)
        child = index._builds.children["episodes-g2"]
        assert MODULE in cmdline(child.pid)
        # Background work: the build yields the cores to the requests of the service that spawned it.
        deadline = time.monotonic() + 30
        while os.getpriority(os.PRIO_PROCESS, child.pid) == os.getpriority(os.PRIO_PROCESS, 0) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + BUILD_NICENESS)
        pause.set()
        await build
        assert await index.count("episodes-g2") == 300
        assert await index.rebuild_advised("episodes-g2") is False  # its HNSW is built
        [best] = await index.search("episodes-g2", data[41].vector, 1)
        assert best.id == 42 and best.score == pytest.approx(1.0, abs=1e-4)
        stored = await index.retrieve_vectors("episodes-g2", [42])
        # Built from float16 stored embeddings: each component within float16's rounding.
        assert stored[42] == pytest.approx(normalized(data[41].vector), abs=1e-3)
    finally:
        await index.close()
    # Reopened (a restart), a built shard is not due another build until enough new writes come:
    # the engine never counts segments below its indexing threshold as indexed.
    reopened = QdrantEdgeIndex(tmp_path / "vectors", optimize_every=100, inline_optimize_points=10)
    try:
        await reopened.ensure_collection("episodes-g2", DIM)
        assert await reopened.rebuild_advised("episodes-g2") is False
        await reopened.upsert("episodes-g2", points(200, seed=3))
        assert await reopened.rebuild_advised("episodes-g2") is True
    finally:
        await reopened.close()


async def test_the_live_collection_serves_and_takes_writes_while_its_successor_is_built(tmp_path):
    index = QdrantEdgeIndex(tmp_path / "vectors", optimize_every=10**9, inline_optimize_points=10)
    data = points(300)
    pause = asyncio.Event()
    try:
        await index.ensure_collection("episodes", DIM)
        await index.upsert("episodes", data)
        build = asyncio.ensure_future(index.build_collection("episodes-g2", DIM, stream(data, pause=pause)))
        while "episodes-g2" not in index._builds.children:
            await asyncio.sleep(0.01)
        assert len(await index.search("episodes", data[0].vector, 3)) == 3
        await index.upsert("episodes", points(3, seed=9))
        assert await index.count("episodes") == 300
        pause.set()
        await build
        assert await index.count("episodes-g2") == 300
    finally:
        await index.close()


async def test_closing_during_a_build_stops_the_child_and_drop_removes_the_partial_shard(tmp_path):
    index = QdrantEdgeIndex(tmp_path / "vectors")
    pause = asyncio.Event()
    build = asyncio.ensure_future(index.build_collection("episodes-g2", DIM, stream(points(300), pause=pause)))
    while "episodes-g2" not in index._builds.children:
        await asyncio.sleep(0.01)
    child = index._builds.children["episodes-g2"]
    await index.close()
    with pytest.raises((VectorIndexError, asyncio.CancelledError)):
        build.cancel()
        await build
    assert child.returncode is not None
    reopened = QdrantEdgeIndex(tmp_path / "vectors")
    try:
        await reopened.drop_collection("episodes-g2")
        assert await reopened.collections() == []
    finally:
        await reopened.close()


PARENT = """
import asyncio, sys
from adapters.qdrant.edge import QdrantEdgeIndex
from domain.vectors import PointBatch, encode_vector

async def forever():
    yield PointBatch([1], [{}], encode_vector([0.5] * 16), 16)
    await asyncio.sleep(3600)
    yield None

async def main():
    index = QdrantEdgeIndex(sys.argv[1])
    task = asyncio.ensure_future(index.build_collection("episodes-g2", 16, forever()))
    while "episodes-g2" not in index._builds.children:
        await asyncio.sleep(0.01)
    print(index._builds.children["episodes-g2"].pid, flush=True)
    await task

asyncio.run(main())
"""


def test_the_build_child_dies_with_a_killed_service(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "vectors")], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        child_pid = int(parent.stdout.readline())
        assert MODULE in cmdline(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert gone(child_pid), "the build child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdout.close()


ORPHAN = """
import sys, time
import qdrant_edge as qe
shard = qe.EdgeShard.load(sys.argv[1])
print("holding", flush=True)
time.sleep(3600)
"""


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


async def test_a_shard_locked_by_an_orphaned_build_child_is_cleared_and_opens(tmp_path):
    first = QdrantEdgeIndex(tmp_path / "vectors")
    await first.ensure_collection("episodes", DIM)
    await first.upsert("episodes", points(5))
    await first.close()
    # An orphan as an older version left them: a build child whose service (--parent) is dead.
    orphan = subprocess.Popen([sys.executable, "-c", ORPHAN, str(tmp_path / "vectors" / "episodes"),
                               MODULE, "--parent", str(_dead_pid())], stdout=subprocess.PIPE, text=True)
    try:
        assert orphan.stdout.readline().strip() == "holding"
        index = QdrantEdgeIndex(tmp_path / "vectors")
        try:
            await index.ensure_collection("episodes", DIM)
            assert await index.count("episodes") == 5
        finally:
            await index.close()
        assert orphan.wait(timeout=30) == -signal.SIGKILL
    finally:
        if orphan.poll() is None:
            orphan.kill()
        orphan.stdout.close()


async def test_a_shard_locked_by_a_live_process_names_it_and_is_left_alone(tmp_path):
    first = QdrantEdgeIndex(tmp_path / "vectors")
    await first.ensure_collection("episodes", DIM)
    await first.close()
    holder = subprocess.Popen([sys.executable, "-c", ORPHAN, str(tmp_path / "vectors" / "episodes")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        index = QdrantEdgeIndex(tmp_path / "vectors")
        try:
            with pytest.raises(VectorIndexError, match=f"locked by another process: pid {holder.pid}"):
                await index.ensure_collection("episodes", DIM)
        finally:
            await index.close()
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def search_pool_threads() -> set[str]:
    names = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:  # a thread that ended meanwhile
            continue
        if name.startswith("edge-search-"):
            names.add(name)
    return names


def engine_default_shard(path: Path) -> Path:
    """A shard of 5 points made with the engine's own defaults (float32, its search pool), as an
    earlier version or another tool would leave it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    made = qe.EdgeShard.create(str(path), qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)))
    made.update(qe.UpdateOperation.upsert_points([qe.Point(p.id, p.vector, p.payload) for p in points(5)]))
    made.close()
    return path


async def test_a_shard_made_with_the_engines_default_search_pool_opens_with_the_services_own(tmp_path):
    path = engine_default_shard(tmp_path / "vectors" / "episodes")
    index = QdrantEdgeIndex(tmp_path / "vectors")
    try:
        # Opened on first use, without ensure_collection (as the CLI does).
        assert len(await index.search("episodes", points(1)[0].vector, 3)) == 3
        assert search_pool_threads() == {f"edge-search-{n}" for n in range(SEARCH_THREADS)}
    finally:
        await index.close()
    assert json.loads((path / "edge_config.json").read_text())["max_search_threads"] == SEARCH_THREADS


def _datatype(path: Path) -> str | None:
    return json.loads((path / "edge_config.json").read_text())["vectors"][""].get("datatype")


async def test_new_shards_keep_vectors_in_float16_and_a_float32_shard_made_before_still_opens(tmp_path):
    # The store keeps vectors in float16 (domain.vectors.encode_vector): float32 in the index
    # would hold no more, in twice the memory. The engine opens a shard only with its own datatype.
    old = engine_default_shard(tmp_path / "vectors" / "entities")
    index = QdrantEdgeIndex(tmp_path / "vectors")
    data = points(40)
    try:
        await index.ensure_collection("entities", DIM)
        await index.upsert("entities", points(6, seed=9)[5:])
        assert await index.count("entities") == 6
        await index.ensure_collection("episodes", DIM)
        await index.upsert("episodes", data[:20])
        await index.build_collection("summaries", DIM, stream(data))
        hits = await index.search("summaries", data[3].vector, 1)
        assert hits[0].id == data[3].id and hits[0].score == pytest.approx(1.0, abs=1e-3)
    finally:
        await index.close()
    assert _datatype(old) is None  # float32, as made
    assert _datatype(tmp_path / "vectors" / "episodes") == "float16"
    assert _datatype(tmp_path / "vectors" / "summaries") == "float16"


def test_a_float16_shard_builds_its_graph_at_as_many_points_as_a_float32_one(tmp_path):
    # The engine indexes a segment by the size of its vectors: float16 halves it, and the shard's
    # threshold with it, so a mid-sized collection is not left to exact scans.
    from adapters.qdrant.edge_build import create_shard, edge_config

    rng = random.Random(3)
    vectors = [[rng.gauss(0, 1) for _ in range(384)] for _ in range(7_000)]
    indexed = {}
    for half in (False, True):
        shard = create_shard(str(tmp_path / f"half-{half}"), edge_config(384, 16, 64, half=half))
        try:
            for start in range(0, len(vectors), 1_000):
                shard.update(qe.UpdateOperation.upsert_points(
                    [qe.Point(i + 1, vectors[i], {}) for i in range(start, start + 1_000)]))
            shard.optimize()
            indexed[half] = shard.info().indexed_vectors_count
        finally:
            shard.close()
    assert indexed == {False: 7_000, True: 7_000}
