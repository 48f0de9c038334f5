"""Build a Qdrant Edge shard in a process of its own.

``python -m adapters.qdrant.edge_build --parent PID PATH DIM M EF_CONSTRUCT`` creates a new shard
at PATH, upserts the points streamed on stdin, builds its HNSW index and exits 0. The engine holds
the GIL while it builds a graph (8 s for 20k x 384 on 2 cores), so the service never builds in its
own process: it streams its stored embeddings here and opens the finished shard.

The process cannot outlive the service: it asks the kernel for SIGKILL when its parent dies
(``PR_SET_PDEATHSIG``) and exits at once if the parent is already gone. It runs at a lower CPU
priority (``BUILD_NICENESS``): the live generation keeps serving while it builds, so a build only
needs the cores the requests leave idle; a busy service then answers at full speed and the build
finishes when the load lets it (on an idle machine it runs as fast as before). Stdin carries frames of
``<u32 header length><u32 vector bytes><JSON {"ids": [...], "payloads": [...]}><float16 vectors>``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import struct
import sys
from typing import BinaryIO

import qdrant_edge as qe

from domain.vectors import AGENT_ID_FIELD, CREATED_AT_FIELD, SESSION_ID_FIELD, USER_ID_FIELD, decode_vector

MODULE = "adapters.qdrant.edge_build"
FRAME = struct.Struct("<II")
_PR_SET_PDEATHSIG = 1
BUILD_NICENESS = 10  # added to the service's own: ~10 % of a core the requests want, all of an idle one
# Each open shard has a search pool of its own, 8 threads by default whatever the cores: 24 threads
# (with their stacks and malloc arenas) for the three collections. The service searches a shard
# from one thread at a time, so the pool only spreads one query over a shard's few segments.
SEARCH_THREADS = 2
INDEXING_THRESHOLD_KB = 10_000  # the engine's default


def edge_config(dimension: int, m: int, ef_construct: int, half: bool = True) -> qe.EdgeConfig:
    """A shard's configuration. ``half``: vectors stored in float16, as the store keeps them
    (``domain.vectors.encode_vector``): float32 would hold no more than that, in twice the memory
    (30 MB of memory-mapped vectors at 20,000 x 384). A float32 shard opens as float32 (the engine
    accepts only a shard's own datatype) until rebuilt."""
    datatype = qe.VectorStorageDatatype.Float16 if half else None
    return qe.EdgeConfig(
        # The engine indexes a segment once its vectors pass a size (10 MB by default): halved with
        # them, so a segment is indexed at the same number of points as in float32 (~6,700 at 384-d).
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=INDEXING_THRESHOLD_KB // 2) if half else None,
        vectors=qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine, datatype=datatype),
        hnsw_config=qe.HnswIndexConfig(
            m=m,
            ef_construct=ef_construct,
            # Filters matching fewer points than this (KB of vectors) are scanned exactly.
            full_scan_threshold=10_000,
        ),
        max_search_threads=SEARCH_THREADS,
    )


def create_shard(path: str, config: qe.EdgeConfig) -> qe.EdgeShard:
    shard = qe.EdgeShard.create(path, config)
    # Payload indexes make filtered search plan well (and let HNSW stay connected inside one
    # session's points); entities simply never carry sessionId.
    shard.update(qe.UpdateOperation.create_field_index(SESSION_ID_FIELD, qe.PayloadSchemaType.Integer))
    shard.update(qe.UpdateOperation.create_field_index(CREATED_AT_FIELD, qe.PayloadSchemaType.Datetime))
    # The owner: a user's (or agent's) search is filtered inside the index, not after it.
    shard.update(qe.UpdateOperation.create_field_index(USER_ID_FIELD, qe.PayloadSchemaType.Keyword))
    shard.update(qe.UpdateOperation.create_field_index(AGENT_ID_FIELD, qe.PayloadSchemaType.Keyword))
    return shard


def encode_frame(ids, payloads, vectors: bytes) -> bytes:
    header = json.dumps({"ids": list(ids), "payloads": list(payloads)}, separators=(",", ":")).encode()
    return FRAME.pack(len(header), len(vectors)) + header + vectors


def die_with_parent(parent: int) -> bool:
    """Ask for SIGKILL when the parent dies; False when it already has (we are an orphan)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid() == parent


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def build(path: str, dimension: int, m: int, ef_construct: int, stream: BinaryIO) -> int:
    shard = create_shard(path, edge_config(dimension, m, ef_construct))
    points = 0
    try:
        while (head := _read_exact(stream, FRAME.size)) is not None:
            header_size, vector_size = FRAME.unpack(head)
            header = json.loads(_read_exact(stream, header_size) or b"{}")
            values = decode_vector(_read_exact(stream, vector_size) or b"")
            batch = [qe.Point(pid, values[i * dimension:(i + 1) * dimension], payload)
                     for i, (pid, payload) in enumerate(zip(header["ids"], header["payloads"], strict=True))]
            if batch:
                shard.update(qe.UpdateOperation.upsert_points(batch))
                points += len(batch)
        shard.optimize()
        shard.flush()
    finally:
        shard.close()
    return points


def main(argv: list[str]) -> int:
    if len(argv) != 6 or argv[0] != "--parent":
        print(f"usage: python -m {MODULE} --parent PID PATH DIM M EF_CONSTRUCT", file=sys.stderr)
        return 2
    parent, path, dimension, m, ef = int(argv[1]), argv[2], int(argv[3]), int(argv[4]), int(argv[5])
    if not die_with_parent(parent):
        return 3
    os.nice(BUILD_NICENESS)
    build(path, dimension, m, ef, sys.stdin.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
