"""QdrantEdgeIndex: the embedded default, Qdrant's own engine in-process (qdrant-edge-py).

One Edge shard per collection under ``path/<collection>``. The engine is synchronous and a shard
directory may be opened only once, so every engine call runs on one dedicated worker thread:
the event loop never blocks on it and calls are serialised without locks.

The engine never optimizes on its own (no background optimizer in Edge): new points land in
plain segments that are searched exactly, and HNSW indexes are only built by ``optimize()``.
After enough writes to a shard the adapter queues an ``optimize()`` on the worker thread behind
the write, so the write returns first. "Enough" grows with the shard (``optimize_growth`` times
the points indexed last time): each optimize merges and re-indexes the shard's big segment, so a
fixed interval would make bulk loads quadratic (measured: 325 points/s at 100k); a geometric
schedule keeps the total build cost a small multiple of one build, and the points waiting in
plain segments (at most that fraction) are still searched exactly.

qdrant-edge-py 0.9's ``optimize()`` holds the GIL while it builds the graph (measured: 8 s for
20k vectors of 384 floats on 2 cores, the event loop frozen all along). So a shard of more than
``IN_PROCESS_OPTIMIZE_POINTS`` points is optimized in a child process: the engine thread closes
the shard and starts the child, a watcher thread waits for it, and the engine thread reopens the
shard afterwards. Meanwhile calls on that collection fail fast with ``VectorIndexError`` (searches
answer from the keyword leg, the outbox retries writes later), and the other collections keep
answering: nothing waits behind a build and nothing is lost.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from domain.errors import DimensionMismatch, VectorIndexError
from domain.vectors import (
    CREATED_AT_FIELD,
    SESSION_ID_FIELD,
    VectorFilter,
    VectorHit,
    VectorPoint,
    as_utc,
)

log = logging.getLogger(__name__)

_ROOT = str(Path(__file__).resolve().parents[2])
IN_PROCESS_OPTIMIZE_POINTS = 5_000  # below this a build takes milliseconds: not worth a process
OPTIMIZE_TIMEOUT_SECONDS = 6 * 3600

T = TypeVar("T")

# The engine creates one shard directory per collection and persists its config here.
_CONFIG_FILE = "edge_config.json"


def edge_filter(filter: VectorFilter | None) -> qe.Filter | None:
    if filter is None or filter.is_empty:
        return None
    must: list[Any] = []
    if filter.session_id is not None:
        must.append(qe.FieldCondition(SESSION_ID_FIELD, match=qe.MatchValue(filter.session_id)))
    if filter.since is not None or filter.until is not None:
        # Full precision RFC 3339: payload times have milliseconds, bounds may have more.
        since = as_utc(filter.since).isoformat() if filter.since else None
        until = as_utc(filter.until).isoformat() if filter.until else None
        must.append(qe.FieldCondition(CREATED_AT_FIELD, range=qe.RangeDateTime(gte=since, lte=until)))
    return qe.Filter(must=must)


class QdrantEdgeIndex:
    """A ``VectorIndex`` on Qdrant Edge shards under ``path``.

    ``hnsw_m`` / ``hnsw_ef_construct`` shape the graph (higher: better recall, slower builds);
    ``search_ef`` is the beam width at query time. A background ``optimize()`` of a shard is
    queued once the points written to it (upserts and deletes) since the last one reach
    ``max(optimize_every, optimize_growth * points indexed then)``.
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
    ) -> None:
        self._path = Path(path)
        self._hnsw_m = hnsw_m
        self._hnsw_ef_construct = hnsw_ef_construct
        self._search_ef = search_ef
        self._optimize_every = optimize_every
        self._optimize_growth = optimize_growth
        self._indexed: dict[str, int] = {}
        self._shards: dict[str, qe.EdgeShard] = {}
        self._written: dict[str, int] = {}
        self._optimize_queued: set[str] = set()
        self._busy: set[str] = set()  # shards being optimized in a child process
        self._children: dict[str, subprocess.Popen] = {}
        self._closing = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qdrant-edge")

    # ---- port ----------------------------------------------------------------------------------

    async def ensure_collection(self, name: str, dimension: int) -> None:
        if name in self._busy:
            # Being built in a child process, so it exists: check its size from its config file.
            existing = self._persisted_size(self._path / name)
            if existing is not None and existing != dimension:
                raise DimensionMismatch(name, existing, dimension)
            return
        await self._run(f"open collection {name!r}", self._ensure, name, dimension)

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        batch = [qe.Point(p.id, [float(x) for x in p.vector], dict(p.payload)) for p in points]
        operation = qe.UpdateOperation.upsert_points(batch)
        await self._run(f"upsert into {collection!r}", self._update, collection, operation, len(batch))

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
            f"delete by filter from {collection!r}", self._update, collection, operation, self._optimize_every
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

    async def optimize(self, collection: str | None = None) -> None:
        """Build pending HNSW indexes now (all shards by default), e.g. after a bulk reindex.

        Not part of the port: only the embedded engine needs telling. Blocks the worker thread
        (and, through the GIL, the process) while it runs.
        """
        names = [collection] if collection is not None else list(self._shards)
        for name in names:
            await self._idle(name)  # a build already running (e.g. queued at start-up) comes first
            await self._run(f"optimize {name!r}", self._optimize_now, name)
            await self._idle(name)

    async def _idle(self, name: str) -> None:
        while name in self._busy and not self._closing:
            await asyncio.sleep(0.05)

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
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close_all)
        finally:
            self._executor.shutdown(wait=True)

    # ---- worker-thread side ----------------------------------------------------------------------

    async def _run(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        if self._closing:
            raise VectorIndexError(f"cannot {what}: the Qdrant Edge index is closed")
        if args and args[0] in self._busy:
            raise VectorIndexError(f"cannot {what}: the collection is being re-indexed; retry shortly")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, functools.partial(fn, *args))
        except VectorIndexError:
            raise
        except Exception as error:  # the engine raises bare Exception with a text
            raise VectorIndexError(f"Qdrant Edge could not {what}: {error}") from error

    def _ensure(self, name: str, dimension: int) -> None:
        shard_path = self._path / name
        config = self._config(dimension)
        if name in self._shards:
            existing = self._persisted_size(shard_path)
            if existing is not None and existing != dimension:
                raise DimensionMismatch(name, existing, dimension)
            return
        try:
            self._path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise VectorIndexError(
                f"cannot create the Qdrant Edge directory {self._path}: {error}"
            ) from error
        if (shard_path / _CONFIG_FILE).exists():
            existing = self._persisted_size(shard_path)
            if existing is not None and existing != dimension:
                raise DimensionMismatch(name, existing, dimension)
            shard = self._open(lambda: qe.EdgeShard.load(str(shard_path), config), shard_path)
        else:
            shard = self._open(lambda: qe.EdgeShard.create(str(shard_path), config), shard_path)
            # Payload indexes make filtered search plan well (and let HNSW stay connected
            # inside one session's points); entities simply never carry sessionId.
            shard.update(
                qe.UpdateOperation.create_field_index(SESSION_ID_FIELD, qe.PayloadSchemaType.Integer)
            )
            shard.update(
                qe.UpdateOperation.create_field_index(CREATED_AT_FIELD, qe.PayloadSchemaType.Datetime)
            )
        self._shards[name] = shard
        self._written[name] = 0
        info = shard.info()
        self._indexed[name] = info.indexed_vectors_count
        # Points written before a crash may still sit in plain segments: index them now, but only
        # when there are enough of them to be worth a build (a start-up must not rebuild for nothing).
        if info.points_count - info.indexed_vectors_count >= self._optimize_every:
            self._queue_optimize(name)

    def _config(self, dimension: int) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine),
            hnsw_config=qe.HnswIndexConfig(
                m=self._hnsw_m,
                ef_construct=self._hnsw_ef_construct,
                # Filters matching fewer points than this (KB of vectors) are scanned exactly.
                full_scan_threshold=10_000,
            ),
        )

    @staticmethod
    def _open(opener: Callable[[], qe.EdgeShard], shard_path: Path) -> qe.EdgeShard:
        try:
            return opener()
        except Exception as error:
            text = str(error)
            if "WouldBlock" in text or "lock" in text.lower():
                reason = "it is locked, probably by another running memory service"
            elif "ermission" in text or "Read-only" in text:
                reason = "it is not writable"
            else:
                reason = "the engine refused it"
            raise VectorIndexError(
                f"cannot open the Qdrant Edge shard {shard_path}: {reason} ({text})"
            ) from error

    @staticmethod
    def _persisted_size(shard_path: Path) -> int | None:
        try:
            config = json.loads((shard_path / _CONFIG_FILE).read_text())
            return int(config["vectors"][""]["size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _shard(self, name: str) -> qe.EdgeShard:
        shard = self._shards.get(name)
        if shard is not None:
            return shard
        shard_path = self._path / name
        if not (shard_path / _CONFIG_FILE).exists():
            raise VectorIndexError(f"vector collection {name!r} does not exist under {self._path}")
        # A shard made by an earlier run is usable without ensure_collection (e.g. by the CLI).
        shard = self._open(lambda: qe.EdgeShard.load(str(shard_path)), shard_path)
        self._shards[name] = shard
        self._written[name] = 0
        self._indexed[name] = shard.info().points_count
        return shard

    def _call(self, collection: str, method: str, request: Any) -> Any:
        return getattr(self._shard(collection), method)(request)

    def _retrieve(self, collection: str, ids: list[int]) -> list[Any]:
        return self._shard(collection).retrieve(ids, with_payload=False, with_vector=True)

    def _update(self, collection: str, operation: qe.UpdateOperation, weight: int) -> None:
        self._shard(collection).update(operation)
        self._written[collection] = self._written.get(collection, 0) + weight
        due = max(self._optimize_every, self._optimize_growth * self._indexed.get(collection, 0))
        if self._written[collection] >= due:
            self._queue_optimize(collection)

    def _queue_optimize(self, collection: str) -> None:
        # Submitted from the worker thread itself: it runs after the current call returns,
        # so the write that triggered it is answered first.
        if collection in self._optimize_queued or self._closing:
            return
        self._optimize_queued.add(collection)
        self._executor.submit(self._optimize, collection)

    def _optimize(self, collection: str) -> None:
        self._optimize_queued.discard(collection)
        shard = self._shards.get(collection)
        if shard is None or self._closing:
            return
        try:
            self._optimize_now(collection)
        except Exception:  # the next write retries; searches still work on plain segments
            log.exception("Qdrant Edge optimize of %r failed", collection)

    def _optimize_now(self, collection: str) -> None:
        shard = self._shard(collection)
        if shard.info().points_count > IN_PROCESS_OPTIMIZE_POINTS:
            self._optimize_in_child(collection, shard)
            return
        shard.optimize()
        self._written[collection] = 0
        self._indexed[collection] = shard.info().points_count

    def _optimize_in_child(self, collection: str, shard: qe.EdgeShard) -> None:
        """Close the shard and start the child; a watcher thread waits for it and then queues the
        reopen, so the engine thread stays free for the other collections meanwhile."""
        shard_path = self._path / collection
        self._busy.add(collection)
        shard.flush()
        shard.close()
        del self._shards[collection]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")])))
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "adapters.qdrant.edge_optimize", str(shard_path)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
            )
        except OSError:
            self._reopen(collection)
            raise
        self._children[collection] = child
        threading.Thread(
            target=self._await_child, args=(collection, child), name=f"qdrant-edge-build-{collection}", daemon=True
        ).start()

    def _await_child(self, collection: str, child: subprocess.Popen) -> None:
        try:
            _, errors = child.communicate(timeout=OPTIMIZE_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            _, errors = child.communicate()
        if child.returncode != 0 and not self._closing:
            tail = (errors or "").strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
            log.warning("Qdrant Edge optimize of %r failed in its child process: %s", collection, tail[0])
        try:
            self._executor.submit(self._reopen, collection)
        except RuntimeError:  # the index was closed meanwhile; the shard stays closed on disk
            self._busy.discard(collection)

    def _reopen(self, collection: str) -> None:
        # Whatever the child did, the shard on disk is consistent: a failed build leaves it as it was.
        self._children.pop(collection, None)
        try:
            if not self._closing:
                shard_path = self._path / collection
                shard = self._open(lambda: qe.EdgeShard.load(str(shard_path)), shard_path)
                self._shards[collection] = shard
                self._written[collection] = 0
                self._indexed[collection] = shard.info().points_count
        finally:
            self._busy.discard(collection)

    def _probe(self) -> None:
        for name, shard in self._shards.items():
            try:
                shard.info()
            except Exception as error:
                raise VectorIndexError(f"Qdrant Edge shard {name!r} does not answer: {error}") from error

    def _close_all(self) -> None:
        # A build still running would keep its shard locked after we exit: stop it (the shard on
        # disk stays as it was before the build) and let the next start build again.
        for child in list(self._children.values()):
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
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
