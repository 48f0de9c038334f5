"""The index owner's socket protocol: length-prefixed msgspec MessagePack frames.

A frame is ``<u32 big-endian length><msgpack body>``. A request is ``[id, op, args]`` with
``args`` decoded by the operation's own type (``ARGS``); an answer is ``[id, error, disk_low,
result]``, ``error`` being ``None`` or ``[kind, message, collection, existing, configured]`` so a
``DimensionMismatch`` or an ``EmbeddingError`` crosses the socket as itself. ``disk_low`` rides on
every answer: the port's ``disk_low()`` is synchronous, so the client answers it from the last
frame it read.

Requests on one connection are answered in any order (each runs as its own task on the owner);
``id`` pairs them up. ``notify`` is the only request without an answer.
"""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from domain.errors import DimensionMismatch, EmbeddingError, VectorIndexError
from domain.vectors import PointBatch, VectorFilter, VectorHit, VectorPoint
from ports.embedder import EmbedderStatus

HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 2**20  # a build batch of 4096 x 4096-d float16 vectors fits with room to spare
NOTIFY = "notify"  # "a write landed in the outbox": wakes the owner's embedding worker, no answer


class Request(msgspec.Struct, array_like=True):
    id: int
    op: str
    args: msgspec.Raw


class Failure(msgspec.Struct, array_like=True):
    kind: str  # "index", "dimension" or "embedding"
    message: str
    collection: str | None = None
    existing: int | None = None
    configured: int | None = None


class Answer(msgspec.Struct, array_like=True):
    id: int
    error: Failure | None
    disk_low: str | None
    result: msgspec.Raw


Filter = VectorFilter | None

# The argument tuple of every operation, decoded with its own type (typed, no hand conversion).
ARGS: dict[str, Any] = {
    "hello": tuple[()],
    NOTIFY: tuple[()],
    "ensure_collection": tuple[str, int],
    "upsert": tuple[str, list[VectorPoint]],
    "search": tuple[str, list[float], int, Filter, float | None],
    "delete": tuple[str, list[int]],
    "delete_by_filter": tuple[str, VectorFilter],
    "count": tuple[str],
    "retrieve_vectors": tuple[str, list[int]],
    "collections": tuple[()],
    "drop_collection": tuple[str, bool],
    "build_open": tuple[str, int],
    "build_batch": tuple[int, PointBatch],
    "build_close": tuple[int],
    "build_abort": tuple[int],
    "point_ids": tuple[str],
    "rebuild_advised": tuple[str],
    "health": tuple[()],
    # Beyond the port: what a worker that does not own the index asks its owner.
    "report": tuple[()],
    # The owner's embedder, for a worker that loads no model of its own (``SocketEmbedder``).
    "embed": tuple[list[str]],
    "embedder_probe": tuple[()],
}

# What each answer's ``result`` decodes to on the client.
RESULTS: dict[str, Any] = {
    "hello": dict[str, Any],
    "search": list[VectorHit],
    "count": int,
    "retrieve_vectors": dict[int, list[float]],
    "collections": list[str],
    "build_open": int,
    "point_ids": list[int],
    "rebuild_advised": bool,
    "health": str | None,
    "report": dict[str, Any],
    "embed": list[list[float]],
    "embedder_probe": EmbedderStatus,
}

_encoder = msgspec.msgpack.Encoder()
_requests = msgspec.msgpack.Decoder(Request)
_answers = msgspec.msgpack.Decoder(Answer)


def frame(message: Any) -> bytes:
    body = _encoder.encode(message)
    return HEADER.pack(len(body)) + body


def request(rid: int, op: str, args: Sequence[Any]) -> bytes:
    return frame((rid, op, msgspec.Raw(_encoder.encode(tuple(args)))))


def answer(rid: int, error: Failure | None, disk_low: str | None, result: Any = None) -> bytes:
    return frame(Answer(rid, error, disk_low, msgspec.Raw(_encoder.encode(result))))


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """The next frame's body; ``IncompleteReadError`` at end of stream."""
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    return await reader.readexactly(size)


def decode_request(body: bytes) -> tuple[Request, Any]:
    """The request and its arguments, typed; ``ValueError`` names what is wrong."""
    try:
        req = _requests.decode(body)
        kind = ARGS.get(req.op)
        if kind is None:
            raise ValueError(f"unknown operation {req.op!r}")
        return req, msgspec.msgpack.decode(req.args, type=kind)
    except msgspec.DecodeError as exc:
        raise ValueError(f"malformed request: {exc}") from None


def decode_answer(body: bytes) -> Answer:
    return _answers.decode(body)


def decode_result(op: str, raw: msgspec.Raw) -> Any:
    return msgspec.msgpack.decode(raw, type=RESULTS.get(op, Any))


def failure_of(error: Exception) -> Failure:
    if isinstance(error, DimensionMismatch):
        return Failure("dimension", error.message, error.collection, error.existing, error.configured)
    if isinstance(error, EmbeddingError):
        return Failure("embedding", error.message)
    message = error.message if isinstance(error, VectorIndexError) else f"{type(error).__name__}: {error}"
    return Failure("index", message)


def raise_failure(failure: Failure) -> None:
    if failure.kind == "dimension" and failure.collection is not None:
        raise DimensionMismatch(failure.collection, failure.existing or 0, failure.configured or 0)
    if failure.kind == "embedding":
        raise EmbeddingError(failure.message)
    raise VectorIndexError(failure.message)


def bindable(path: str | Path) -> str:
    """A name for ``path`` short enough for a unix socket address (108 bytes on Linux): a long
    path is reached through ``/proc/self/fd`` of its directory, opened once per process."""
    path = str(path)
    if len(path.encode()) < 100:
        return path
    directory, name = os.path.split(path)
    fd = _dir_fds.get(directory)
    if fd is None:
        fd = _dir_fds[directory] = os.open(directory or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{name}"


_dir_fds: dict[str, int] = {}
