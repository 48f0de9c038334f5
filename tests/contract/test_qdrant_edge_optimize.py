"""Qdrant Edge builds large shards' indexes in a child process, so the service never freezes."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest

import adapters.qdrant.edge as edge
from adapters.qdrant.edge import QdrantEdgeIndex
from domain.errors import DimensionMismatch, VectorIndexError
from domain.vectors import VectorPoint, normalized

DIM = 16


def points(n: int, seed: int = 7) -> list[VectorPoint]:
    rnd = random.Random(seed)
    return [VectorPoint(i, [rnd.uniform(-1, 1) for _ in range(DIM)], {"sessionId": 1, "createdAt": "2026-01-01T00:00:00.000Z"})
            for i in range(1, n + 1)]


async def test_a_large_shard_is_optimized_in_a_child_process_and_keeps_its_points(tmp_path, monkeypatch):
    monkeypatch.setattr(edge, "IN_PROCESS_OPTIMIZE_POINTS", 10)
    index = QdrantEdgeIndex(tmp_path / "vectors", optimize_every=10**9)
    try:
        await index.ensure_collection("episodes", DIM)
        data = points(300)
        await index.upsert("episodes", data)
        children: list[list[str]] = []
        real_popen = edge.subprocess.Popen

        def spy(args, **kwargs):
            children.append(list(args))
            return real_popen(args, **kwargs)

        monkeypatch.setattr(edge.subprocess, "Popen", spy)
        await index.optimize("episodes")
        assert children and children[0][1:3] == ["-m", "adapters.qdrant.edge_optimize"]
        assert await index.count("episodes") == 300
        [best] = await index.search("episodes", data[41].vector, 1)
        assert best.id == 42 and best.score == pytest.approx(1.0, abs=1e-4)
        stored = await index.retrieve_vectors("episodes", [42])
        assert stored[42] == pytest.approx(normalized(data[41].vector), abs=1e-5)
    finally:
        await index.close()


async def test_a_collection_being_optimized_fails_fast_and_the_others_keep_answering(tmp_path, monkeypatch):
    monkeypatch.setattr(edge, "IN_PROCESS_OPTIMIZE_POINTS", 10)
    index = QdrantEdgeIndex(tmp_path / "vectors", optimize_every=10**9)
    try:
        await index.ensure_collection("episodes", DIM)
        await index.ensure_collection("entities", DIM)
        await index.upsert("episodes", points(300))
        gate = threading.Event()
        real_wait = QdrantEdgeIndex._await_child

        def held(self, collection, child):
            gate.wait(30)  # the build stays "in progress" until the test has looked
            return real_wait(self, collection, child)

        monkeypatch.setattr(QdrantEdgeIndex, "_await_child", held)
        building = asyncio.ensure_future(index.optimize("episodes"))
        for _ in range(3000):
            if "episodes" in index._busy:
                break
            await asyncio.sleep(0.001)
        try:
            with pytest.raises(VectorIndexError, match="re-indexed"):
                await index.search("episodes", [0.1] * DIM, 3)
            # Start-up may ensure the collection mid-build: it exists, and its size is still checked.
            await index.ensure_collection("episodes", DIM)
            with pytest.raises(DimensionMismatch):
                await index.ensure_collection("episodes", DIM + 1)
            # The engine thread is free meanwhile: other collections answer at once.
            assert await index.count("entities") == 0
            await index.upsert("entities", points(3))
        finally:
            gate.set()
        await building
        assert len(await index.search("episodes", [0.1] * DIM, 3)) == 3
        assert await index.count("episodes") == 300 and await index.count("entities") == 3
    finally:
        await index.close()


async def test_closing_during_a_build_stops_the_child_and_the_shard_reopens_next_time(tmp_path, monkeypatch):
    monkeypatch.setattr(edge, "IN_PROCESS_OPTIMIZE_POINTS", 10)
    index = QdrantEdgeIndex(tmp_path / "vectors", optimize_every=10**9)
    await index.ensure_collection("episodes", DIM)
    await index.upsert("episodes", points(300))
    await index._run("optimize", index._optimize_now, "episodes")
    children = list(index._children.values())
    await index.close()
    assert all(child.poll() is not None for child in children)
    reopened = QdrantEdgeIndex(tmp_path / "vectors", optimize_every=10**9)
    try:
        await reopened.ensure_collection("episodes", DIM)
        await reopened.optimize("episodes")
        assert await reopened.count("episodes") == 300
    finally:
        await reopened.close()
