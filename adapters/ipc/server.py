"""``IndexServer``: the index owner answering the ``VectorIndex`` port over a unix socket.

The process that owns the vector index (one opener only for an embedded engine) serves it here to
the service's other worker processes. The socket file is created with mode 0600 beside the store
(bound under a temporary name, narrowed, then renamed into place, so it is never reachable with
wider rights). Every request runs as its own task, so a slow build batch never holds up a search.
``target`` is any ``VectorIndex`` (the contract suite serves a bare adapter; the service serves
its ``IndexManager``); ``extras`` answers operations beyond the port (``report``, ``embed``), and
``on_notify`` is called for each ``notify`` frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from adapters.ipc import wire
from domain.errors import EmbeddingError, VectorIndexError
from domain.vectors import PointBatch

log = logging.getLogger("nexusai.ipc")

BUILD_QUEUE = 2  # batches buffered per build: the client waits for room (back-pressure)


class _Build:
    """One streamed ``build_collection``: batches arrive as requests, the build runs as a task."""

    def __init__(self, target: Any, name: str, dimension: int, writer: asyncio.StreamWriter) -> None:
        self.writer = writer  # the connection that streams it: its end abandons the build
        self.queue: asyncio.Queue[PointBatch | None] = asyncio.Queue(BUILD_QUEUE)
        self.task = asyncio.create_task(target.build_collection(name, dimension, self._batches()))

    async def _batches(self) -> AsyncIterator[PointBatch]:
        while (batch := await self.queue.get()) is not None:
            yield batch

    async def put(self, batch: PointBatch | None) -> None:
        """Queue a batch (``None`` ends the stream); a build that already failed raises its error."""
        put = asyncio.ensure_future(self.queue.put(batch))
        await asyncio.wait({put, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not put.done():
            put.cancel()
            self.task.result()  # raises the build's error
            raise VectorIndexError("the build ended before its last batch")


class IndexServer:
    def __init__(self, target: Any, path: str | Path, *, extras: dict[str, Callable[..., Awaitable[Any]]] | None = None,
                 on_notify: Callable[[], None] = lambda: None) -> None:
        self._target = target
        self.path = str(path)
        self._extras = extras or {}
        self._on_notify = on_notify
        self._server: asyncio.Server | None = None
        self._builds: dict[int, _Build] = {}
        self._next_build = 0
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._inode: int | None = None

    async def start(self) -> None:
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        self._server = await asyncio.start_unix_server(self._serve, wire.bindable(temporary))
        os.chmod(temporary, 0o600)
        self._inode = os.stat(temporary).st_ino
        os.replace(temporary, self.path)  # a stale socket of a dead owner is replaced, never reused

    async def close(self) -> None:
        """Stop accepting, drop every connection (clients fail over at once), remove the socket."""
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections.values()):
            writer.transport.abort()  # the connection's reader ends; its callers get "owner went away"
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        for build in self._builds.values():
            build.task.cancel()
        self._builds.clear()
        with contextlib.suppress(FileNotFoundError):
            if self._is_ours():
                os.unlink(self.path)
        self._server = None

    def _is_ours(self) -> bool:
        """The socket file is still the one this server bound (a successor may have replaced it)."""
        try:
            return os.stat(self.path).st_ino == self._inode
        except OSError:
            return False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        if me is not None:
            self._connections[me] = writer
        pending: set[asyncio.Task] = set()
        try:
            while True:
                try:
                    body = await wire.read_frame(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except ValueError as exc:
                    log.warning("index socket: dropping a connection: %s", exc)
                    return
                task = asyncio.create_task(self._answer(body, writer))
                pending.add(task)
                task.add_done_callback(pending.discard)
        finally:
            for task in pending:
                task.cancel()
            for token, build in list(self._builds.items()):
                if build.writer is writer:
                    build.task.cancel()
                    del self._builds[token]
            writer.close()
            if me is not None:
                self._connections.pop(me, None)

    async def _answer(self, body: bytes, writer: asyncio.StreamWriter) -> None:
        try:
            req, args = wire.decode_request(body)
        except ValueError as exc:
            log.warning("index socket: %s", exc)
            return
        if req.op == wire.NOTIFY:
            self._on_notify()
            return
        error, result = None, None
        try:
            result = await self._call(req.op, args, writer)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure answers; the connection stays up
            # The port's own failures cross the socket as themselves, and what raised them logs
            # what deserves it: a traceback per request would repeat one known failure per search.
            if not isinstance(exc, (VectorIndexError, EmbeddingError)):
                log.exception("index socket: %s failed", req.op)
            error = wire.failure_of(exc)
        try:
            writer.write(wire.answer(req.id, error, self._disk_low(), result))
        except Exception as exc:  # an unencodable result must not leave the caller waiting
            writer.write(wire.answer(req.id, wire.failure_of(exc), self._disk_low()))

    def _disk_low(self) -> str | None:
        try:
            return self._target.disk_low()
        except Exception:
            return None

    async def _call(self, op: str, args: tuple, writer: asyncio.StreamWriter) -> Any:
        target = self._target
        if op == "hello":
            return {"pid": os.getpid(), "persistent": bool(getattr(target, "persistent", False))}
        if op in self._extras:
            return await self._extras[op](*args)
        if op == "build_open":
            self._next_build += 1
            self._builds[self._next_build] = _Build(target, *args, writer)
            return self._next_build
        if op == "build_batch":
            await self._build(args[0]).put(args[1])
            return None
        if op == "build_close":
            build = self._build(args[0])
            try:
                await build.put(None)
                return await build.task
            finally:
                self._builds.pop(args[0], None)
        if op == "build_abort":
            if (build := self._builds.pop(args[0], None)) is not None:
                build.task.cancel()
            return None
        method = getattr(target, op, None)
        if method is None:
            raise VectorIndexError(f"the index owner does not answer {op!r}")
        return await method(*args)

    def _build(self, token: int) -> _Build:
        build = self._builds.get(token)
        if build is None:
            raise VectorIndexError(f"no build {token} in progress on the index owner")
        return build
