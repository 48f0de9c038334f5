"""``serve`` with ``WORKERS`` > 1: one listening socket, N worker processes under uvicorn's supervisor.

The parent validates the configuration and opens (migrates) the store once, binds the socket, and
runs uvicorn's ``Multiprocess`` supervisor, which spawns the workers, replaces a worker that dies
or stops answering its health ping, and on SIGTERM/SIGINT asks every worker to drain and waits.
Each worker builds its own app from a picklable ``WorkerApp`` (the parent's exact settings, not a
second reading of the environment) and asks the kernel to kill it when the parent dies
(``PR_SET_PDEATHSIG``), so ``kill -9`` of the parent leaves no orphan serving the port or holding
the index.

Per worker: SQLite connections (WAL lets processes read and write one file; writers take turns on
its write lock), admission control (``MAX_IN_FLIGHT`` per worker: the kernel hands connections to
whichever worker accepts first, often unevenly, so an even split of the limit refused requests
that one process would have admitted), metrics, the health monitor and MCP sessions (stateless
across workers). The vector index has one owner, the index host (``app.index_host``), a process
of its own that ``serve`` starts beside the workers at every ``WORKERS`` value; the workers follow
it (``app.index_role``). ``serve`` also provides the shared metrics directory (``shared_metrics_dir``)
in which the workers and the host count.
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
from dataclasses import dataclass
from pathlib import Path

from app.config import ConfigError, Settings

log = logging.getLogger("nexusai.app")

_PR_SET_PDEATHSIG = 1
STARTUP_FAILURE = 3  # uvicorn's exit code for "failed before serving": the supervisor then stops


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
    ``AUTO_MAX``), or 1 where several processes cannot share the data. Raises ``ConfigError``
    when more than one is asked for explicitly and cannot work."""
    alone = _single_process_reason(settings)
    requested = settings.workers
    if requested:
        if requested > 1 and alone:
            raise ConfigError("WORKERS", f"must be 1 when {alone}, got {requested}")
        return requested
    return 1 if alone else max(1, min(usable_cores(), AUTO_MAX))


AUTO_MAX = 4


def _single_process_reason(settings: Settings) -> str | None:
    if settings.store != "sqlite":
        return f"STORE={settings.store} (each process would have its own memory)"
    if settings.sqlite_path == ":memory:":
        return "SQLITE_PATH=:memory: (each process would have its own database)"
    return None


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies; exit at once if it already has."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        log.warning("cannot ask for the parent-death signal (errno %d)", ctypes.get_errno())
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


@dataclass(frozen=True)
class WorkerApp:
    """The app factory uvicorn calls in each spawned worker (pickled across the spawn)."""

    settings: Settings
    workers: int
    parent: int

    def __call__(self):
        die_with_parent(self.parent)
        from app.logs import configure
        from app.main import create_app

        settings = self.settings
        configure(settings.log_level, settings.log_format, secrets=settings.secrets)
        # configure() re-enables uvicorn's access logger, which uvicorn silenced already in this
        # process (``serve`` runs with access_log=False; the request log line is the app's own).
        logging.getLogger("uvicorn.access").propagate = False
        try:
            from app.index_host import hosted

            # ``serve`` runs the vector index in its own process: every worker follows it.
            return create_app(settings, workers=self.workers, index_host=hosted(settings), serving=True)
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


def run_supervisor(settings: Settings, workers: int, **uvicorn_options) -> None:
    """Bind once and serve with ``workers`` processes until SIGTERM/SIGINT (then drain all)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    class Supervisor(Multiprocess):
        """uvicorn's supervisor, closing its own copy of the listening socket when told to stop:
        the workers close theirs as they start draining, so the port refuses new connections at
        once, as a single process does (the kernel would otherwise queue them on the parent's
        copy until every worker has finished)."""

        def _stop_listening(self) -> None:
            for listener in self.sockets:
                listener.close()

        def handle_term(self) -> None:
            self._stop_listening()
            super().handle_term()

        def handle_int(self) -> None:
            self._stop_listening()
            super().handle_int()

    config = uvicorn.Config(WorkerApp(settings, workers, os.getpid()), factory=True, workers=workers,
                            host=settings.host, port=settings.port, **uvicorn_options)
    sock = config.bind_socket()
    log.info("serving on %s:%d with %d worker processes", settings.host, settings.port, workers)
    try:
        Supervisor(config, sockets=[sock]).run()
    finally:
        sock.close()


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
