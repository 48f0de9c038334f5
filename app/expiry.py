"""The expiry sweep: a background loop that purges expired records every EXPIRY_SWEEP_SECONDS.

Reads never return an expired record; the sweep only reclaims the space (rows, keyword rows,
stored embeddings) and queues the vector deletes. A failed pass is logged and retried next time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from domain.services import ExpiryService

log = logging.getLogger(__name__)


class ExpirySweeper:
    def __init__(self, expiry: ExpiryService, seconds: float,
                 turn: Callable[[], Awaitable[bool]] | None = None) -> None:
        self._expiry = expiry
        self._turn = turn  # processes sharing the store sweep one at a time (ports.maintenance)
        self._seconds = seconds
        self._task: asyncio.Task | None = None
        self.purged = 0  # records purged since start

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="expiry-sweep")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def sweep(self) -> dict[str, int]:
        if self._turn is not None and not await self._turn():
            return {}
        purged = await self._expiry.purge()
        self.purged += sum(purged.values())
        if any(purged.values()):
            log.info("purged expired records: %s", purged)
        return purged

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must survive anything; the next pass retries
                log.exception("purging expired records failed; retrying")
            await asyncio.sleep(self._seconds)
