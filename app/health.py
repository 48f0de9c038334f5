"""Health: background checks keep a snapshot current; the routes only read it.

Every component has its own check loop (``HealthMonitor``): it runs the check with a time limit,
stamps the result with the time the check *finished*, sleeps ``HEALTH_INTERVAL`` and goes again.
So ``GET /health`` does no I/O and never waits on a hung embedder or a stuck disk, however many
clients ask at once; a check that overruns its time limit reports its component down, with the
details of its last check that answered (and their age, ``detailsAgeSeconds``). Adding a
component is one ``monitor.add(name, check)`` call: a check is an async function returning a
``Reading``.

Routes:

- ``GET /health`` — 200 while the process serves; ``status`` is ``ok``, ``degraded`` (a component
  is impaired but the API answers), ``down`` (a critical component — store writability, disk —
  fails: writes are refused) or ``starting`` (no check has finished yet). With ``MEMORY_API_KEY``
  set, a caller without the key sees only ``status``.
- ``GET /health/live`` — liveness: 200 ``{"status": "ok"}`` whenever the event loop answers.
- ``GET /health/ready`` — readiness: 200 when every critical component is ok, else 503 (with
  ``Retry-After``), for load balancers and orchestrators.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State

from app.config import Settings
from domain.models import parse_timestamp
from domain.redaction import redact

log = logging.getLogger("nexusai.health")

OK, DEGRADED, DOWN, UNKNOWN, STARTING = "ok", "degraded", "down", "unknown", "starting"
STARTING_RECHECK = 0.2  # seconds: a component that is starting (a model loading) is re-checked this soon
STALE_BACKLOG_SECONDS = 300.0  # an unembedded record older than this means embedding is stuck


@dataclass(frozen=True)
class Reading:
    """One check's result: a status, details for operators, and an error text (redacted)."""

    status: str
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


Check = Callable[[], Awaitable[Reading]]


@dataclass
class _Component:
    check: Check
    critical: bool
    reading: Reading = field(default_factory=lambda: Reading(UNKNOWN, error="not checked yet"))
    checked_at: float | None = None  # monotonic time the last check finished
    checked_wall: str | None = None
    details_at: float | None = None  # monotonic time of the last check that answered (its details are shown)


class HealthMonitor:
    """Runs every component's check in the background and keeps the latest reading of each."""

    def __init__(self, interval: float, timeout: float, secrets: tuple[str, ...] = ()) -> None:
        self.interval = interval
        self.timeout = timeout
        self._secrets = secrets
        self._components: dict[str, _Component] = {}
        self._tasks: list[asyncio.Task] = []
        self._refreshing: dict[str, asyncio.Task] = {}
        self._stopping = False

    def add(self, name: str, check: Check, *, critical: bool = False) -> None:
        """Register a component; ``critical`` ones decide readiness (the API cannot write without them)."""
        self._components[name] = _Component(check, critical)

    def start(self) -> None:
        self._stopping = False
        for name in self._components:
            self._tasks.append(asyncio.create_task(self._loop(name), name=f"health-{name}"))

    async def stop(self) -> None:
        # The flag as well as the cancel: a check finishing at the moment of cancellation can
        # swallow it, and the loop must still end.
        self._stopping = True
        for task in [*self._tasks, *self._refreshing.values()]:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def refresh(self, name: str | None = None) -> None:
        """Check now (every component, or one) and wait for the result. Concurrent callers share
        one check per component instead of starting their own."""
        names = [name] if name else list(self._components)
        await asyncio.gather(*(self._shared_check(n) for n in names))

    def _shared_check(self, name: str) -> asyncio.Task:
        task = self._refreshing.get(name)
        if task is None or task.done():
            task = asyncio.ensure_future(self._check(name))
            self._refreshing[name] = task
        return task

    async def _loop(self, name: str) -> None:
        while not self._stopping:
            await self._shared_check(name)
            starting = self._components[name].reading.status == STARTING
            await asyncio.sleep(min(self.interval, STARTING_RECHECK) if starting else self.interval)

    async def _check(self, name: str) -> None:
        component = self._components[name]
        try:
            async with asyncio.timeout(self.timeout):
                reading = await component.check()
        except TimeoutError:
            reading = self._overrun(component)
        except Exception as exc:  # a check reports; it never stops the loop
            reading = Reading(DOWN, error=f"{type(exc).__name__}: {exc}")
        if reading.error:
            reading = Reading(reading.status, reading.details, redact(reading.error, self._secrets))
        # Stamped after the check: a slow check must not look older (or fresher) than it is.
        component.reading, component.checked_at = reading, time.monotonic()
        if not reading.details.get("overran"):
            component.details_at = component.checked_at
        component.checked_wall = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _overrun(self, component: _Component) -> Reading:
        """A check that overran its time limit says so, and keeps the details of the last check that
        answered (tools read them: ``index`` under ``vectorIndex``) with how old they are."""
        error = f"no answer within {self.timeout:g}s"
        last = component.reading
        if component.details_at is None:
            return Reading(DOWN, {"overran": True}, error)
        details = {**last.details, "overran": True,
                   "detailsAgeSeconds": round(time.monotonic() - component.details_at, 3)}
        return Reading(DOWN, details, error)

    # -- what the routes read ------------------------------------------------------------------
    def status(self) -> str:
        """``down`` when a critical component is down, ``starting`` before every check has run once,
        ``degraded`` when any component is impaired (a non-critical one down included), ``starting``
        while a component still gets ready (the embedding model loading), else ``ok``."""
        components = self._components.values()
        if any(c.critical and c.reading.status == DOWN for c in components):
            return DOWN
        if any(c.checked_at is None for c in components):
            return STARTING
        if any(c.reading.status not in (OK, STARTING) for c in components):
            return DEGRADED
        if any(c.reading.status == STARTING for c in components):
            return STARTING
        return OK

    def ready(self) -> bool:
        return all(c.critical is False or (c.checked_at is not None and c.reading.status == OK)
                   for c in self._components.values())

    def snapshot(self) -> dict[str, Any]:
        now = time.monotonic()
        return {
            name: {"status": c.reading.status, **c.reading.details, "error": c.reading.error,
                   "critical": c.critical, "checkedAt": c.checked_wall,
                   "ageSeconds": None if c.checked_at is None else round(now - c.checked_at, 3)}
            for name, c in self._components.items()
        }


# -- the checks ------------------------------------------------------------------------------------
def standard_monitor(container, settings: Settings, dead_lettered: Callable[[], int]) -> HealthMonitor:
    """The service's components: store (a real write), disk, vector index, embedder, backlog."""
    monitor = HealthMonitor(settings.health_interval, max(1.0, min(settings.health_interval * 2, 10.0)),
                            settings.secrets)

    async def store() -> Reading:
        error = await container.store().operations.health()
        return Reading(OK if error is None else DOWN, {"writable": error is None}, error)

    async def disk() -> Reading:
        if settings.store != "sqlite" or settings.sqlite_path == ":memory:":
            return Reading(OK, {"path": None, "freeBytes": None})
        where = Path(settings.sqlite_path).expanduser().resolve().parent
        usage = await asyncio.to_thread(shutil.disk_usage, where)
        details = {"path": str(where), "freeBytes": usage.free, "minFreeBytes": settings.min_free_disk_bytes}
        if usage.free < settings.min_free_disk_bytes:
            return Reading(DOWN, details, f"{usage.free} bytes free, below MIN_FREE_DISK_MB")
        return Reading(OK, details)

    async def vector_index() -> Reading:
        # The index manager's status object: consistent, verifying, rebuilding with
        # progress and ETA, diverged, unavailable, disk low; it repairs on its own, so a
        # difference from the store is reported with what is being done about it.
        manager = container.index_manager()
        error = await manager.health()
        if error is not None:
            return Reading(DOWN, {"kind": settings.vector_index}, error)
        await manager.refresh()
        status = manager.status()
        details = {"kind": settings.vector_index,
                   "points": {name: c["points"] for name, c in status["collections"].items()}, "index": status}
        problem = manager.problem()
        return Reading(DEGRADED if problem else OK, details, problem)

    async def embedder() -> Reading:
        probe = await container.embedder().probe()  # answers at once while a model loads
        return Reading(OK if probe.reachable else STARTING if probe.starting else DOWN,
                       {"kind": settings.embedder, "reachable": probe.reachable, "model": probe.model,
                        "dimension": probe.dimension}, probe.error)

    async def backlog() -> Reading:
        found = await container.store().outbox.backlog()
        age = None
        if found.pending and found.oldest_created_at:
            age = round((datetime.now(UTC) - parse_timestamp(found.oldest_created_at)).total_seconds(), 3)
        details = {"pending": found.pending, "failing": found.failing, "dead": found.dead,
                   "oldestAgeSeconds": age, "deadLetteredSinceStart": dead_lettered()}
        problems = []
        if found.dead:
            problems.append(f"{found.dead} dead-lettered jobs (memory-service dead-letters list)")
        if found.failing:
            problems.append(f"{found.failing} jobs failing")
        if age is not None and age > STALE_BACKLOG_SECONDS:
            problems.append(f"oldest pending job is {age:.0f}s old")
        if problems:
            last = f"; last error: {found.last_error}" if found.last_error else ""
            return Reading(DEGRADED, details, "; ".join(problems) + last)
        return Reading(OK, details)

    monitor.add("store", store, critical=True)
    monitor.add("disk", disk, critical=True)
    monitor.add("vectorIndex", vector_index)
    monitor.add("embedder", embedder)
    monitor.add("embeddingBacklog", backlog)
    return monitor


# -- routes ----------------------------------------------------------------------------------------
@get("/health", summary="Service status and every component's last check", tags=["operations"],
     description="200 while serving. `status`: ok, degraded, down (a critical component fails) or starting. "
                 "Components are checked in the background every HEALTH_INTERVAL seconds; with MEMORY_API_KEY "
                 "set, callers without the key see only `status`.")
async def health(request: Request, state: State) -> dict[str, Any]:
    monitor: HealthMonitor = state.health
    body: dict[str, Any] = {"status": monitor.status()}
    if request.scope.get("authenticated", True):
        body["ready"] = monitor.ready()
        body["components"] = monitor.snapshot()
    return body


@get("/health/live", summary="Liveness: the process serves", tags=["operations"])
async def live() -> dict[str, str]:
    return {"status": "ok"}


@get("/health/ready", summary="Readiness: 200 when the critical components are ok, else 503", tags=["operations"])
async def ready(state: State) -> Response[dict[str, Any]]:
    monitor: HealthMonitor = state.health
    if monitor.ready():
        return Response({"status": "ready"}, status_code=200)
    return Response({"status": "not_ready", "health": monitor.status()}, status_code=503,
                    headers={"Retry-After": str(max(1, round(monitor.interval)))})


HEALTH_ROUTES = [health, live, ready]
