"""Admission control that does not spin with clients who ignore ``Retry-After``.

``AdmissionControl`` answers a request beyond ``MAX_IN_FLIGHT`` with 503 + ``Retry-After`` at
once. A client that honours the header comes back later; one that does not (load generators,
naive retry loops) comes back the moment the 503 arrives, and at 256 connections the service
then spends its cores parsing and refusing thousands of requests a second — admitted throughput
fell from 720 req/s at 8 connections to 382 at 256 (bench/hardening.py).

``PatientAdmission`` keeps the first refusal immediate and makes the next one cost nothing: a
connection that was refused and sends again before its ``Retry-After`` has passed is *held* —
its request waits, without using CPU, in a first-come-first-served line for a free slot, for at
most the ``Retry-After`` delay. When a slot frees it goes straight to the first held request (a
newcomer cannot jump the line); a request still waiting when its delay ends is refused again.
A connection served from the line stays in it: its next request, if no slot is free, queues
again (within ``Retry-After`` of the last one) instead of meeting an immediate 503. So each
impatient connection costs at most one refusal per ``Retry-After``, and the service's cores go
to the admitted requests. A client that waits as told never meets the line. The line is bounded
(``max_held``, default four times the limit, at least 256); beyond it requests are refused at once.

A connection is known by its peer address and port (``scope["client"]``): a keep-alive
connection is one client.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Collection

from litestar.types import ASGIApp, Receive, Scope, Send

from app.middleware import AdmissionControl, body_first, has_body

_SWEEP_EVERY = 1024  # refusals between sweeps of the refused-connections table


class PatientAdmission(AdmissionControl):
    """``AdmissionControl`` whose repeat refusals are held instead of answered at once (above)."""

    def __init__(self, app: ASGIApp | None, limit: int, exempt: Collection[str], retry_after: int = 1,
                 max_body: int = 1_048_576, *, hold: float | None = None, max_held: int | None = None) -> None:
        super().__init__(app, limit, exempt, retry_after, max_body)
        self.hold = float(retry_after if hold is None else hold)
        self.max_held = max(256, 4 * limit) if max_held is None else max_held
        self.held = 0  # requests held so far (counted once each)
        self._line: deque[asyncio.Future[None]] = deque()
        self._refused_at: dict[object, float] = {}  # connection -> monotonic time of its last refusal
        self._since_sweep = 0

    @property
    def waiting(self) -> int:
        return sum(1 for waiter in self._line if not waiter.done())

    async def admit(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        if self.passes(scope):
            await app(scope, receive, send)
            return
        if has_body(scope):
            receive = await body_first(receive, self.max_body)  # a slow upload holds no slot
        client = scope.get("client")
        if self.in_flight < self.limit:
            self.in_flight += 1
            self._refused_at.pop(client, None)  # a free slot at once: this connection is not surplus now
        elif await self._wait_for_slot(client):
            # Served from the line: the connection stays in it for its next request (were it
            # refused again at once, every second request of a surplus connection would be a 503).
            self._refused_at[client] = time.monotonic()  # (a held request always has a peer)
        else:
            self._refuse_later(client)
            await self.refuse(scope, send)
            return
        await self.run_in_slot(scope, receive, send, app)

    async def _wait_for_slot(self, client: object) -> bool:
        """True once a slot was handed to this request (``in_flight`` already counts it); False at
        once for a connection not refused within the last ``hold`` seconds or a full line, else
        False when the hold ends without a slot."""
        refused = self._refused_at.get(client) if client is not None else None  # no peer: nothing to know it by
        if refused is None or time.monotonic() - refused >= self.hold or self.waiting >= self.max_held:
            return False
        self.held += 1
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(waiter)
        try:
            async with asyncio.timeout(self.hold):
                await waiter
            return True
        except TimeoutError:
            # A slot handed over at the moment the hold ended is this request's: keep it.
            return waiter.done() and not waiter.cancelled()
        except BaseException:  # cancelled (shutdown): a slot handed over meanwhile goes on
            if waiter.done() and not waiter.cancelled():
                self._release()
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            if waiter.cancelled():  # out of the line now, so a long stall cannot grow it without bound
                with contextlib.suppress(ValueError):
                    self._line.remove(waiter)

    def _release(self) -> None:
        while self._line:
            waiter = self._line.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to the first held request: in_flight unchanged
                return
        self.in_flight -= 1

    def _refuse_later(self, client: object) -> None:
        self.rejected += 1
        if self.on_reject is not None:  # the metrics counter (summed across worker processes)
            self.on_reject()
        if client is not None:
            self._refused_at[client] = time.monotonic()
        self._since_sweep += 1
        if self._since_sweep >= _SWEEP_EVERY:
            self._since_sweep = 0
            cutoff = time.monotonic() - self.hold
            for key in [k for k, at in self._refused_at.items() if at < cutoff]:
                del self._refused_at[key]
