"""How many processes ``serve`` runs, and what several of them share.

One process by default on the embedded engines: Qdrant Edge's shards have one opener, and an
in-memory index or store is private to its process, so ``WORKERS`` > 1 is refused there at start
(``ConfigError``). Where the data lives in engines built to be shared — a Qdrant server as the
vector index (``VECTOR_INDEX=server``) over a SQLite file (WAL, busy timeout) or PostgreSQL —
``serve`` runs ``WORKERS`` processes under uvicorn's own ``workers`` option. Each worker builds
its app from the environment (``worker_app``), runs its own embedding worker and index manager
(one at a time maintains the index: ``ports.maintenance``), and asks the kernel to kill it when
uvicorn's supervisor dies (``PR_SET_PDEATHSIG``), so ``kill -9`` of ``serve`` leaves no orphan
serving the port. Per worker: connections, admission control (``MAX_IN_FLIGHT``: the kernel hands
connections to whichever worker accepts first, often unevenly), the health monitor and MCP
sessions (stateless across workers). Metrics are summed over the workers through
prometheus-client's multiprocess directory (``shared_metrics_dir``).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from app.config import ConfigError, Settings

log = logging.getLogger("nexusai.app")

_PR_SET_PDEATHSIG = 1
STARTUP_FAILURE = 3  # uvicorn's exit code for "failed before serving": the supervisor then stops
SHARED_ENGINES = ("several workers need engines that processes share: VECTOR_INDEX=server (a Qdrant server at "
                  "QDRANT_URL) together with STORE=postgres or STORE=sqlite on a file")


def usable_cores(cgroup: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")) -> int:
    """The cores this process may run on (its CPU affinity), fewer when a CPU quota on its cgroup
    or any cgroup above it allows less (a container limited to 1 CPU on a 16-core host: 1; a
    systemd unit with ``CPUQuota=150%``: 2)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup, membership)
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def cgroup_cpu_quota(mount: Path, membership: Path) -> float | None:
    """CPUs the cgroup quotas allow this process: the smallest quota from its own cgroup (named
    in ``membership``, i.e. /proc/self/cgroup) up to the root of the hierarchy mounted at
    ``mount``, as every ancestor's quota caps the cgroups below it. cgroup v2: ``cpu.max`` in
    each directory; v1: ``cpu.cfs_quota_us`` under ``cpu/``. None: no limit.

    A process in a container with its own cgroup namespace sees its cgroup as ``/``, so only the
    mount root is read; a path not present under the mount (the namespace is the host's, the
    mount is the container's own cgroup) is skipped on the way up to the root."""
    v2, v1 = _own_cgroups(membership)
    quotas = [q for directory in _upwards(mount, v2) if (q := _v2_quota(directory)) is not None]
    quotas += [q for directory in _upwards(mount / "cpu", v1) if (q := _v1_quota(directory)) is not None]
    return min(quotas, default=None)


def _own_cgroups(membership: Path) -> tuple[str, str]:
    """This process's cgroup in the v2 hierarchy (the ``0::`` line) and in v1's ``cpu``
    controller; ``/`` for either when unknown."""
    v2 = v1 = "/"
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return v2, v1
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _upwards(mount: Path, cgroup: str) -> list[Path]:
    """The directories from ``cgroup``'s own up to the mount root."""
    parts = [part for part in cgroup.strip().split("/") if part not in ("", ".", "..")]
    return [mount.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]


def _v2_quota(directory: Path) -> float | None:
    try:
        limit, period = (directory / "cpu.max").read_text().split()[:2]  # "max 100000" or "150000 100000"
    except (OSError, ValueError):
        return None
    return _cpus(limit, period)


def _v1_quota(directory: Path) -> float | None:
    try:
        limit = (directory / "cpu.cfs_quota_us").read_text().strip()  # -1: none
        period = (directory / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return _cpus(limit, period)


def _cpus(limit: str, period: str) -> float | None:
    try:
        quota, every = float(limit), float(period)
    except ValueError:  # "max"
        return None
    return quota / every if quota > 0 and every > 0 else None


def resolve_workers(settings: Settings) -> int:
    """The number of worker processes: ``WORKERS`` (0 means one per usable core, at most
    ``AUTO_MAX``, where several may run), or 1 where several processes cannot share the data.
    Raises ``ConfigError`` when more than one is asked for and cannot work."""
    alone = single_process_reason(settings)
    requested = settings.workers
    if requested:
        if requested > 1 and alone:
            raise ConfigError("WORKERS", f"must be 1 with {alone}; {SHARED_ENGINES} (got {requested})")
        return requested
    return 1 if alone else max(1, min(usable_cores(), AUTO_MAX))


AUTO_MAX = 4


def single_process_reason(settings: Settings) -> str | None:
    """Why this configuration's data can be served by one process only, or None."""
    if settings.vector_index == "edge":
        return "the embedded Qdrant Edge index (VECTOR_INDEX=edge: one process opens its shards)"
    if settings.vector_index == "memory":
        return "VECTOR_INDEX=memory (each process would have its own index)"
    if settings.store == "memory":
        return "STORE=memory (each process would have its own memory)"
    if settings.store == "sqlite" and settings.sqlite_path == ":memory:":
        return "SQLITE_PATH=:memory: (each process would have its own database)"
    return None


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies; exit at once if it already has."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        log.warning("cannot ask for the parent-death signal (errno %d)", ctypes.get_errno())
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


PARENT_VARIABLE = "MEMORY_SERVICE_SUPERVISOR"  # the pid of ``serve``, for its workers only


def worker_app():
    """The app factory uvicorn calls in each worker it spawns (``uvicorn.run(..., workers=N)``):
    the settings read from the same environment as ``serve`` read them."""
    die_with_parent(int(os.environ.get(PARENT_VARIABLE) or os.getppid()))
    from app.config import load_settings
    from app.heap import limit_malloc_arenas
    from app.logs import configure
    from app.main import create_app

    settings = load_settings()
    limit_malloc_arenas(settings.malloc_arenas)  # a spawned interpreter: mallopt is per process
    configure(settings.log_level, settings.log_format, secrets=settings.secrets)
    # configure() re-enables uvicorn's access logger, which uvicorn silenced already in this
    # process (``serve`` runs with access_log=False; the request log line is the app's own).
    logging.getLogger("uvicorn.access").propagate = False
    try:
        return create_app(settings, serving=True)
    except Exception:  # the parent checked the configuration: this is the environment
        log.exception("worker %d could not build the app", os.getpid())
        sys.exit(STARTUP_FAILURE)


def check_before_spawning(settings: Settings) -> None:
    """What ``serve`` checks before it serves, done once in the parent: the configuration
    (``ConfigError``) and the store, opened and migrated here so the workers never race a
    migration. Nothing stays open: the parent only supervises."""
    import asyncio

    from app.container import build_container
    from app.main import check_configuration

    container = build_container(settings)
    check_configuration(container)
    asyncio.run(container.store().close())


def run_workers(settings: Settings, workers: int, **uvicorn_options) -> None:
    """Serve with ``workers`` processes under uvicorn's supervisor until SIGTERM/SIGINT."""
    import uvicorn

    os.environ[PARENT_VARIABLE] = str(os.getpid())
    log.info("serving on %s:%d with %d worker processes", settings.host, settings.port, workers)
    uvicorn.run("app.serving:worker_app", factory=True, workers=workers, host=settings.host, port=settings.port,
                **uvicorn_options)


METRICS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


METRICS_DIR_PREFIX = "nexusai-metrics-"
_METRICS_DIR_NAME = re.compile(re.escape(METRICS_DIR_PREFIX) + r"([0-9]+)-[a-z0-9_]{8}")  # + mkdtemp's suffix


@contextlib.contextmanager
def shared_metrics_dir() -> Iterator[str]:
    """A fresh private directory (0700) for prometheus-client's multiprocess files, named in the
    environment the workers are spawned with (they import prometheus-client afresh and count
    into it, so a scrape answered by any worker sums them all), removed at exit. Any value the
    caller had set is replaced: files left by another run would be counted as this one's.
    The name carries this process's pid: a service killed with ``kill -9`` never removes its
    directory, so each start removes those whose service is gone (``sweep_metrics_dirs``)."""
    sweep_metrics_dirs()
    path = tempfile.mkdtemp(prefix=f"{METRICS_DIR_PREFIX}{os.getpid()}-")  # mode 0700
    previous = os.environ.get(METRICS_DIR_VARIABLE)
    os.environ[METRICS_DIR_VARIABLE] = path
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop(METRICS_DIR_VARIABLE, None)
        else:
            os.environ[METRICS_DIR_VARIABLE] = previous
        shutil.rmtree(path, ignore_errors=True)


def sweep_metrics_dirs(root: str | None = None) -> list[str]:
    """Remove the metrics directories in ``root`` (the temporary directory) that belong to this
    user and name a process that no longer runs; answer what was removed. A directory whose pid
    runs (this service's, or a reused pid) is left, and so is any other name. (Services in
    different pid namespaces sharing one temporary directory as one user would see each other's
    pids as gone: give each its own ``TMPDIR``.)"""
    root = root or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            named = _METRICS_DIR_NAME.fullmatch(entry.name)  # exactly what shared_metrics_dir makes
            if named is None or _runs(int(named[1])):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid():
                    shutil.rmtree(entry.path)
                    removed.append(entry.path)
    return removed


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: another user's process runs with that pid
        return True
    return True
