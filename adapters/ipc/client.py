"""``SocketVectorIndex``: the ``VectorIndex`` port answered by the index owner over a unix socket.

A worker process that does not own the vector index reaches it through this adapter. One
connection carries every call, answered out of order and matched by id. The connection is opened
on first use and again after it is lost, so when the owner dies and another process takes over
the socket path, the next call reaches the new owner. While no owner answers, every call raises
``VectorIndexError`` saying so (searches then fall back to keywords) and ``health`` returns that
reason: derived data never stops the service.

An owner can also be there and not answer (stopped, stuck in a build, its event loop blocked).
The calls a request waits on — ``search``, ``retrieve_vectors``, ``count`` and ``ask`` with a
number — are queries: each is bounded as a whole by the query timeout (``VECTOR_QUERY_TIMEOUT``
in a follower), so such an owner costs a search that long and it answers from keywords. Once a
query on the open connection went unanswered, later queries fail at once, unsent, until the owner
answers anything on it again (the late answer itself will do) or the connection is lost: requests
neither wait again nor pile up in the owner's socket while it is hung. Writes, builds and status
calls (the embedding worker, the CLI) keep the longer call timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from adapters.ipc import wire
from domain.errors import VectorIndexError
from domain.vectors import PointBatch, VectorFilter, VectorHit, VectorPoint

CONNECT_SECONDS = 2.0
CALL_SECONDS = 30.0  # a write or a status call; streamed builds wait as long as the owner builds


class SocketVectorIndex:
    def __init__(self, path: str | Path, *, connect_timeout: float = CONNECT_SECONDS,
                 call_timeout: float = CALL_SECONDS, query_timeout: float | None = None,
                 on_lost: Callable[[], None] = lambda: None) -> None:
        self.path = str(path)
        self._on_lost = on_lost  # called when an open connection drops (the owner may have died)
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._query_timeout = call_timeout if query_timeout is None else query_timeout
        # The connection on which a query went unanswered (and since when): queries fail at once
        # while it is the open one and has sent nothing since.
        self._stalled: asyncio.StreamWriter | None = None
        self._stalled_since, self._stalled_by = 0.0, ""
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task | None = None
        self._connecting: asyncio.Lock | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._next_id = 0
        self._disk_low: str | None = None
        self._closed = False
        self._notice_due = False  # a notify frame is scheduled for the end of this loop pass
        self.persistent = False  # the owner's answer, known after the first call
        self.owner_pid: int | None = None

    # ---- connection ----------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _connection(self) -> asyncio.StreamWriter:
        if self._closed:
            raise VectorIndexError("the index client is closed")
        if self.connected:
            return self._writer  # type: ignore[return-value]
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self.connected:
                return self._writer  # type: ignore[return-value]
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(wire.bindable(self.path)), self._connect_timeout)
            except (OSError, TimeoutError) as exc:
                raise VectorIndexError(f"no index owner answers at {self.path}: {exc}") from None
            self._reading = asyncio.create_task(self._read(reader, writer), name="index-client-reader")
            try:
                hello = await self._ask(writer, "hello", ())
            except BaseException:  # unanswered (or the caller's bound ran out): carry no call on it
                writer.close()
                raise
            self.persistent, self.owner_pid = bool(hello.get("persistent")), hello.get("pid")
            self._writer = writer
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reason = "the index owner closed the connection"
        try:
            while True:
                found = wire.decode_answer(await wire.read_frame(reader))
                if self._stalled is writer:  # it answers again (a late answer counts)
                    self._stalled = None
                self._disk_low = found.disk_low
                waiter = self._pending.pop(found.id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(found)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except (ValueError, msgspec.DecodeError) as exc:
            reason = f"the index owner sent a malformed answer: {exc}"
        finally:
            self._lost(writer, reason)

    def _lost(self, writer: asyncio.StreamWriter, reason: str) -> None:
        if self._writer is writer:
            self._writer = None
        if self._stalled is writer:
            self._stalled = None
        writer.close()
        if not self._closed:
            self._on_lost()
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            if not waiter.done():
                waiter.set_exception(VectorIndexError(f"{reason} (it is restarting or another process takes over)"))

    # ---- calls ---------------------------------------------------------------------------------

    async def _ask(self, writer: asyncio.StreamWriter, op: str, args: Sequence[Any], *,
                   timeout: float | None = -1.0, drain: bool = False) -> Any:
        self._next_id += 1
        rid = self._next_id
        waiter = asyncio.get_running_loop().create_future()
        self._pending[rid] = waiter
        try:
            writer.write(wire.request(rid, op, args))
            if drain:
                await writer.drain()
            found = await asyncio.wait_for(waiter, self._call_timeout if timeout == -1.0 else timeout)
        except TimeoutError:
            waited = self._call_timeout if timeout == -1.0 else timeout
            raise VectorIndexError(f"the index owner did not answer {op} within {waited:g}s") from None
        except ConnectionError as exc:
            raise VectorIndexError(f"the index owner went away: {exc}") from None
        finally:
            self._pending.pop(rid, None)
        if found.error is not None:
            wire.raise_failure(found.error)
        return wire.decode_result(op, found.result)

    async def _call(self, op: str, *args: Any, timeout: float | None = -1.0, drain: bool = False) -> Any:
        """One request; ``timeout`` -1 means the client's call timeout (each step: connect, hello,
        the answer), ``None`` waits as long as it takes for the answer."""
        return await self._ask(await self._connection(), op, args, timeout=timeout, drain=drain)

    async def _query(self, op: str, args: Sequence[Any], timeout: float) -> Any:
        """A call a request waits on. ``timeout`` bounds all of it, a reconnect (its connect and
        ``hello``) included. While an earlier query on the open connection is unanswered, it fails
        at once and sends nothing (see the module's docstring)."""
        if self._stalled is not None and self._stalled is self._writer and self.connected:
            waited = time.monotonic() - self._stalled_since
            raise VectorIndexError(f"the index owner has not answered for {waited:.1f}s ({self._stalled_by}); "
                                   "queries fail at once until it answers")
        sent: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(timeout):
                sent = await self._connection()
                return await self._ask(sent, op, args, timeout=None)
        except TimeoutError:
            if sent is not None and sent is self._writer and self._stalled is not sent:
                self._stalled, self._stalled_since = sent, time.monotonic() - timeout
                self._stalled_by = f"{op} unanswered within {timeout:g}s"
            raise VectorIndexError(f"the index owner did not answer {op} within {timeout:g}s") from None

    async def ask(self, op: str, *args: Any, timeout: float | None = -1.0) -> Any:
        """An operation beyond the port (``embed``, ``embedder_probe``): the owner's answer, its
        failure raised as itself, ``VectorIndexError`` when no owner answers. A number ``timeout``
        makes it a query: bounded as a whole, a reconnect included, and failing at once while an
        earlier query is unanswered (a search waits no longer than its embedder allows)."""
        if timeout is None or timeout == -1.0:
            return await self._call(op, *args, timeout=timeout)
        return await self._query(op, args, timeout)

    def notify(self) -> None:
        """Tell the owner a write is in the outbox (best effort: it polls anyway).

        The notices of one pass of the event loop go as one frame, sent once that pass is over: a
        group commit answers many writes at once, and their requests finish in the same pass, so
        the owner is woken once (one socket write here, one frame read there) instead of once per
        request. The worker drains every due job per wake-up, so one notice serves them all."""
        if self._notice_due or not self.connected or self._stalled is not None:
            return  # not to a hung owner: its worker polls the outbox anyway
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside the loop (a tool, a test): at once
            self._send_notice()
            return
        self._notice_due = True
        loop.call_soon(self._send_notice)

    def _send_notice(self) -> None:
        self._notice_due = False
        if self.connected:
            with contextlib.suppress(Exception):
                self._writer.write(wire.request(0, wire.NOTIFY, ()))  # type: ignore[union-attr]

    # ---- the VectorIndex port --------------------------------------------------------------------

    async def ensure_collection(self, name: str, dimension: int) -> None:
        await self._call("ensure_collection", name, dimension)

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        if points:
            await self._call("upsert", collection, list(points), drain=True)

    async def search(self, collection: str, vector: Sequence[float], limit: int,
                     filter: VectorFilter | None = None, score_threshold: float | None = None) -> list[VectorHit]:
        return await self._query("search", (collection, list(vector), limit, filter, score_threshold),
                                 self._query_timeout)

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        if ids:
            await self._call("delete", collection, list(ids))

    async def delete_by_filter(self, collection: str, filter: VectorFilter) -> None:
        await self._call("delete_by_filter", collection, filter)

    async def count(self, collection: str) -> int:
        return await self._query("count", (collection,), self._query_timeout)  # /metrics reads it

    async def retrieve_vectors(self, collection: str, ids: Sequence[int]) -> dict[int, list[float]]:
        return await self._query("retrieve_vectors", (collection, list(ids)), self._query_timeout)

    async def collections(self) -> list[str]:
        return await self._call("collections")

    async def drop_collection(self, name: str, keep: bool = False) -> None:
        await self._call("drop_collection", name, keep)

    async def build_collection(self, name: str, dimension: int, batches: AsyncIterator[PointBatch]) -> None:
        token = await self._call("build_open", name, dimension)
        try:
            async for batch in batches:
                await self._call("build_batch", token, batch, timeout=None, drain=True)
            await self._call("build_close", token, timeout=None)
        except BaseException:
            if self.connected:
                with contextlib.suppress(Exception):
                    await self._call("build_abort", token)
            raise

    async def point_ids(self, collection: str) -> list[int]:
        return await self._call("point_ids", collection)

    async def rebuild_advised(self, collection: str) -> bool:
        return await self._call("rebuild_advised", collection)

    def disk_low(self) -> str | None:
        return self._disk_low  # from the owner's latest answer

    async def health(self) -> str | None:
        try:
            return await self._call("health")
        except VectorIndexError as exc:
            return exc.message

    async def report(self) -> dict[str, Any]:
        """The owner's index status, problem and health (for a worker's /health and /metrics)."""
        return await self._call("report")

    async def close(self) -> None:
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reading
            self._reading = None
