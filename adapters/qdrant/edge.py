"""QdrantEdgeIndex: the embedded default, Qdrant's own engine in-process (qdrant-edge-py).

One Edge shard per collection under ``path/<collection>``. The engine is synchronous and a shard
directory may be opened only once, so every engine call runs on one dedicated worker thread:
the event loop never blocks on it and calls are serialised without locks.

When a shard is due an HNSW build, and whether in place or as a new generation, is
``edge_schedule``'s rule; ``build_collection`` runs the build in a child process supervised by
``edge_supervisor``. A large shard is never optimized in place, because the engine holds the GIL
for the whole build and the shard would have to be closed meanwhile.

Shards are memory-mapped: a write into a full volume would SIGBUS the process. Every write and
build first checks the free space of the index volume against ``disk_reserve_bytes`` and refuses
(``VectorIndexError``, so the outbox keeps the job) below it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from adapters.qdrant.edge_build import create_shard, edge_config
from adapters.qdrant.edge_schedule import BuildSchedule
from adapters.qdrant.edge_shard import (
    CONFIG_FILE, edge_filter, free_bytes, open_shard, persisted_half, persisted_size)
from adapters.qdrant.edge_supervisor import BuildSupervisor
from domain.errors import DimensionMismatch, VectorIndexError
from domain.vectors import PointBatch, VectorFilter, VectorHit, VectorPoint

log = logging.getLogger(__name__)

ASIDE = ".aside"  # shards moved out of service (corrupted, locked, foreign), kept for inspection

T = TypeVar("T")


class QdrantEdgeIndex:
    """A ``VectorIndex`` on Qdrant Edge shards under ``path``.

    ``hnsw_m`` / ``hnsw_ef_construct`` shape the graph (higher: better recall, slower builds);
    ``search_ef`` is the beam width at query time. A shard is due an index build once the points
    written to it since the last one reach ``max(optimize_every, optimize_growth * points indexed
    then)``; up to ``inline_optimize_points`` points it is optimized in place (its segments
    merged), above that the index manager rebuilds it as a new generation. The engine builds a
    segment's HNSW graph only once its vectors pass ``indexing_threshold`` (``edge_build``: about
    6,700 float16 vectors of 384-d), so below that an in-place build leaves a plain segment, which
    a search scans exactly.
    """

    persistent = True

    def __init__(
        self,
        path: str | Path,
        *,
        hnsw_m: int = 16,
        hnsw_ef_construct: int = 128,
        search_ef: int = 128,
        optimize_every: int = 5_000,
        optimize_growth: float = 0.5,
        inline_optimize_points: int = 5_000,
        disk_reserve_bytes: int = 128 * 2**20,
    ) -> None:
        self._path = Path(path)
        self._hnsw_m = hnsw_m
        self._hnsw_ef_construct = hnsw_ef_construct
        self._search_ef = search_ef
        self._reserve = disk_reserve_bytes
        self._schedule = BuildSchedule(optimize_every=optimize_every, optimize_growth=optimize_growth,
                                       inline_points=inline_optimize_points)
        self._builds = BuildSupervisor()
        self._shards: dict[str, qe.EdgeShard] = {}
        self._optimize_queued: set[str] = set()
        self._closing = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qdrant-edge")

    # ---- port ----------------------------------------------------------------------------------

    async def ensure_collection(self, name: str, dimension: int) -> None:
        await self._run(f"open collection {name!r}", self._ensure, name, dimension)

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        # The points are converted on the index thread, not here: 1,000 points of 384 floats took
        # ~30 ms, time the event loop (every request, /health too) would have stood still.
        await self._run(f"upsert into {collection!r}", self._upsert, collection, points)

    def _upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        batch = [qe.Point(p.id, [float(x) for x in p.vector], dict(p.payload)) for p in points]
        self._update(collection, qe.UpdateOperation.upsert_points(batch), len(batch))

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        score_threshold: float | None = None,
    ) -> list[VectorHit]:
        if limit <= 0:
            return []
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest([float(x) for x in vector]),
            filter=edge_filter(filter),
            score_threshold=score_threshold,
            params=qe.SearchParams(hnsw_ef=max(self._search_ef, limit)),
            with_payload=False,
            with_vector=False,
        )
        found = await self._run(f"search {collection!r}", self._call, collection, "query", request)
        return [VectorHit(int(p.id), float(p.score)) for p in found]

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        if not ids:
            return
        operation = qe.UpdateOperation.delete_points(list(ids))
        await self._run(f"delete from {collection!r}", self._update, collection, operation, len(ids))

    async def delete_by_filter(self, collection: str, filter: VectorFilter) -> None:
        condition = edge_filter(filter)
        if condition is None:
            raise VectorIndexError(f"refusing to delete every point of {collection!r}: the filter is empty")
        operation = qe.UpdateOperation.delete_points_by_filter(condition)
        # A filtered delete may remove many points; count it as a full batch for the optimizer.
        await self._run(
            f"delete by filter from {collection!r}", self._update, collection, operation, self._schedule.optimize_every
        )

    async def count(self, collection: str) -> int:
        return await self._run(
            f"count {collection!r}", self._call, collection, "count", qe.CountRequest(exact=True)
        )

    async def retrieve_vectors(self, collection: str, ids: Sequence[int]) -> dict[int, list[float]]:
        if not ids:
            return {}
        records = await self._run(f"retrieve from {collection!r}", self._retrieve, collection, list(ids))
        return {int(r.id): list(r.vector) for r in records if isinstance(r.vector, list)}

    async def collections(self) -> list[str]:
        if not self._path.is_dir():
            return []
        return sorted(p.name for p in self._path.iterdir() if p.is_dir() and not p.name.startswith("."))

    async def drop_collection(self, name: str, keep: bool = False) -> None:
        await self._builds.stop(name)
        await self._run(f"drop collection {name!r}", self._drop, name, keep)

    async def build_collection(self, name: str, dimension: int, batches: AsyncIterator[PointBatch]) -> None:
        target = self._path / name
        if target.exists():
            raise VectorIndexError(f"cannot build vector collection {name!r}: {target} exists")
        self._check_disk(f"build {name!r}")
        argv = [str(dimension), str(self._hnsw_m), str(self._hnsw_ef_construct)]
        await self._builds.build(name, target, argv, batches, lambda: self._check_disk(f"build {name!r}"))
        await self.ensure_collection(name, dimension)

    async def point_ids(self, collection: str) -> list[int]:
        return await self._run(f"list points of {collection!r}", self._point_ids, collection)

    async def rebuild_advised(self, collection: str) -> bool:
        return await self._run(f"inspect {collection!r}", self._rebuild_advised, collection)

    def disk_low(self) -> str | None:
        try:
            free = free_bytes(self._path)
        except OSError as error:
            return f"cannot read the free space under {self._path}: {error}"
        if free < self._reserve:
            return (f"disk low: {free // 2**20} MiB free under {self._path}, below the reserve of "
                    f"{self._reserve // 2**20} MiB (INDEX_DISK_RESERVE_MB); vector writes wait in the outbox")
        return None

    async def optimize(self, collection: str | None = None) -> None:
        """Build pending HNSW indexes now, in place (all shards by default).

        Not part of the port: for benchmarks and offline tools only. It holds the engine thread
        (and, through the GIL, the process) while it runs; the service builds large shards as
        new generations instead.
        """
        names = [collection] if collection is not None else list(self._shards)
        for name in names:
            await self._run(f"optimize {name!r}", self._optimize_now, name)

    async def health(self) -> str | None:
        if self._closing:
            return "the Qdrant Edge index is closed"
        try:
            await self._run("health check", self._probe)
        except VectorIndexError as error:
            return error.message
        except Exception as error:  # noqa: BLE001 - health must never raise
            return f"Qdrant Edge health check failed: {error}"
        return None

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        await self._builds.stop_all()  # a half-built shard is worthless; the manager builds again next start
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close_all)
        finally:
            self._executor.shutdown(wait=True)

    # ---- worker-thread side ----------------------------------------------------------------------

    async def _run(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        if self._closing:
            raise VectorIndexError(f"cannot {what}: the Qdrant Edge index is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, functools.partial(fn, *args))
        except VectorIndexError:
            raise
        except Exception as error:  # the engine raises bare Exception with a text
            raise VectorIndexError(f"Qdrant Edge could not {what}: {error}") from error

    def _check_disk(self, what: str) -> None:
        if (reason := self.disk_low()) is not None:
            raise VectorIndexError(f"cannot {what}: {reason}")

    def _ensure(self, name: str, dimension: int) -> None:
        shard_path = self._path / name
        if name in self._shards:
            existing = persisted_size(shard_path)
            if existing is not None and existing != dimension:
                raise DimensionMismatch(name, existing, dimension)
            return
        try:
            self._path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise VectorIndexError(
                f"cannot create the Qdrant Edge directory {self._path}: {error}"
            ) from error
        config = edge_config(dimension, self._hnsw_m, self._hnsw_ef_construct)
        if (shard_path / CONFIG_FILE).exists():
            existing = persisted_size(shard_path)
            if existing is not None and existing != dimension:
                raise DimensionMismatch(name, existing, dimension)
            config = edge_config(dimension, self._hnsw_m, self._hnsw_ef_construct, half=persisted_half(shard_path))
            shard = open_shard(lambda: qe.EdgeShard.load(str(shard_path), config), shard_path)
        else:
            self._check_disk(f"create {name!r}")
            shard = open_shard(lambda: create_shard(str(shard_path), config), shard_path)
        self._adopt(name, shard)

    def _adopt(self, name: str, shard: qe.EdgeShard) -> None:
        self._shards[name] = shard
        info = shard.info()
        if self._schedule.opened(name, info.points_count, info.indexed_vectors_count):
            self._queue_optimize(name)

    def _shard(self, name: str) -> qe.EdgeShard:
        shard = self._shards.get(name)
        if shard is not None:
            return shard
        shard_path = self._path / name
        if not (shard_path / CONFIG_FILE).exists():
            raise VectorIndexError(f"vector collection {name!r} does not exist under {self._path}")
        # A shard made by an earlier run is usable without ensure_collection (e.g. by the CLI); given
        # the current config, it opens with this version's search pool whatever it was made with.
        dimension = persisted_size(shard_path)
        config = None if dimension is None else edge_config(dimension, self._hnsw_m, self._hnsw_ef_construct,
                                                            half=persisted_half(shard_path))
        shard = open_shard(lambda: qe.EdgeShard.load(str(shard_path), config), shard_path)
        self._adopt(name, shard)
        return shard

    def _call(self, collection: str, method: str, request: Any) -> Any:
        return getattr(self._shard(collection), method)(request)

    def _retrieve(self, collection: str, ids: list[int]) -> list[Any]:
        return self._shard(collection).retrieve(ids, with_payload=False, with_vector=True)

    def _point_ids(self, collection: str) -> list[int]:
        shard = self._shard(collection)
        found: list[int] = []
        offset = None
        while True:
            records, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=10_000, with_payload=False,
                                                            with_vector=False))
            found.extend(int(r.id) for r in records)
            if offset is None:
                return sorted(found)

    def _update(self, collection: str, operation: qe.UpdateOperation, weight: int) -> None:
        shard = self._shard(collection)
        self._check_disk(f"write to {collection!r}")
        shard.update(operation)
        if self._schedule.wrote(collection, weight) and self._schedule.inline(shard.info().points_count):
            self._queue_optimize(collection)

    def _rebuild_advised(self, collection: str) -> bool:
        return self._schedule.rebuild_advised(collection, self._shard(collection).info().points_count)

    def _queue_optimize(self, collection: str) -> None:
        # Submitted from the worker thread itself: it runs after the current call returns,
        # so the write that triggered it is answered first.
        if collection in self._optimize_queued or self._closing:
            return
        self._optimize_queued.add(collection)
        self._executor.submit(self._optimize, collection)

    def _optimize(self, collection: str) -> None:
        self._optimize_queued.discard(collection)
        if collection not in self._shards or self._closing:
            return
        try:
            self._optimize_now(collection)
        except Exception:  # the next write retries; searches still work on plain segments
            log.exception("Qdrant Edge optimize of %r failed", collection)

    def _optimize_now(self, collection: str) -> None:
        shard = self._shard(collection)
        shard.optimize()
        self._schedule.built(collection, shard.info().points_count)

    def _drop(self, name: str, keep: bool) -> None:
        shard = self._shards.pop(name, None)
        self._schedule.forget(name)
        if shard is not None:
            try:
                shard.close()
            except Exception:  # a broken shard may refuse to close; its files go regardless
                log.warning("Qdrant Edge shard %r did not close cleanly", name, exc_info=True)
        path = self._path / name
        if not path.exists():
            return
        if keep:
            aside = self._path / ASIDE
            aside.mkdir(exist_ok=True)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            path.rename(aside / f"{name}-{stamp}")
            log.warning("moved the Qdrant Edge shard %s aside to %s", path, aside / f"{name}-{stamp}")
        else:
            shutil.rmtree(path)

    def _probe(self) -> None:
        for name, shard in self._shards.items():
            try:
                shard.info()
            except Exception as error:
                raise VectorIndexError(f"Qdrant Edge shard {name!r} does not answer: {error}") from error

    def _close_all(self) -> None:
        failures = []
        for name, shard in self._shards.items():
            try:
                shard.flush()
                shard.close()
            except Exception as error:  # close the others anyway
                failures.append(f"{name}: {error}")
        self._shards.clear()
        if failures:
            raise VectorIndexError("Qdrant Edge could not close cleanly: " + "; ".join(failures))
