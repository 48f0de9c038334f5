"""The index host: the vector index's owner in a process of its own that serves no HTTP.

``memory-service serve`` on a SQLite file starts it at every ``WORKERS`` value. It holds the owner
lock (``<SQLITE_PATH>.owner``), opens the index, runs the index manager (verify, heal, builds),
the embedding worker and the index socket (``<SQLITE_PATH>.sock``), all through
``app.index_role``'s machinery; every HTTP-serving process follows it over that socket. So Qdrant
Edge's native calls (which hold the GIL while they write and search), the embedding of documents
and the conversion of points never share a GIL or an event loop with the requests.

``IndexHost`` is the serving process's side: a thread that spawns the host, waits for it, and
when it dies (``kill -9``, a crash) starts another after a backoff; the new one takes the lock and
the socket over. Only the host ever owns the index: an HTTP process never takes the role, so the
index never moves back into a serving process and a restarted host never waits for a worker to
let go of it. Meanwhile searches answer from keywords (``degraded``), ``/health`` says so, and
nothing acknowledged is lost (the outbox is in SQLite). The host asks the kernel to kill it when
the serving process dies (``PR_SET_PDEATHSIG``: ``kill -9`` of the service leaves no orphan holding
the lock); ``stop`` sends it SIGTERM after the HTTP side has drained: the worker finishes its pass,
the socket and the index close, the lock is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import threading
import time
from typing import Any

from app import heap
from app.config import Settings

log = logging.getLogger("nexusai.index")

PROCESS_NAME = b"memory-index"  # /proc/<pid>/comm and ps: tells the host from the HTTP workers
BACKOFF_FIRST = 0.5  # seconds before the first restart; doubled per quick death, up to BACKOFF_MAX
BACKOFF_MAX = 15.0
STEADY_SECONDS = 60.0  # a host that lived this long died of something new: restart at once again
STOP_SECONDS = 20.0  # SIGTERM to exit: the worker's pass, the socket, the index; then SIGKILL
_PR_SET_NAME = 15


def hosted(settings: Settings) -> bool:
    """Whether ``serve`` runs the index in a host of its own: a store on a file other processes
    can open (in memory, every process would have its own)."""
    return settings.store == "sqlite" and settings.sqlite_path not in ("", ":memory:")


def name_process(name: bytes = PROCESS_NAME) -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


# -- the host process --------------------------------------------------------------------------------
def host_main(settings: Settings, parent: int) -> None:
    """The spawned process: own the index until SIGTERM (or the parent's death)."""
    from app.logs import configure
    from app.serving import die_with_parent

    die_with_parent(parent)
    name_process()
    # Ctrl-C in a terminal reaches the whole process group: the serving process drains its HTTP
    # side first and then stops the host with SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure(settings.log_level, settings.log_format, secrets=settings.secrets)
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(_own_until_stopped(settings))


async def _own_until_stopped(settings: Settings) -> None:
    from app.container import build_container, shutdown
    from app.index_role import attach_index_role
    from app.startup import freeze_heap_once_loaded

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signal.signal(signal.SIGTERM, lambda *_: loop.call_soon_threadsafe(stopping.set))
    container = build_container(settings)
    role = None
    try:
        await container.store_resource()
        (await container.embedder_resource()).start()  # a model loads in the background
        # Before anything builds a service: indexing must get the role's view of the index.
        role = attach_index_role(container, settings)
        container.metrics()  # the embed counters count into the shared metrics files
        await role.own()
        heap.freeze_start_up()  # start-up's objects out of every later collection (app.heap)
        settling = asyncio.create_task(freeze_heap_once_loaded(container.embedder()))  # and the model's
        await stopping.wait()
        settling.cancel()
    finally:
        if role is not None:
            try:
                await role.stop()  # the worker's pass ends, the socket and the index close, the lock goes
            except Exception:
                log.exception("stopping the index host failed")
        await shutdown(container)


# -- the serving process's side ----------------------------------------------------------------------
class IndexHost:
    """Starts the host process, restarts it when it dies, stops it on ``stop``."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._process: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> IndexHost:
        # The thread that spawns the host must live as long as the host: the parent-death signal
        # fires when the spawning *thread* ends. It ends only after ``stop`` has reaped the host.
        self._thread = threading.Thread(target=self._supervise, name="index-host-supervisor", daemon=True)
        self._thread.start()
        return self

    def _spawn(self) -> Any:
        with self._lock:
            if self._stopping.is_set():
                return None
            process = self._context.Process(target=host_main, args=(self._settings, os.getpid()),
                                            name="memory-index", daemon=False)
            process.start()
            self._process = process
            return process

    def _supervise(self) -> None:
        backoff = BACKOFF_FIRST
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                process = self._spawn()
            except Exception:
                log.exception("starting the index host failed")
                process = None
            else:
                if process is None:
                    return
                log.info("index host started (pid %d)", process.pid)
                process.join()
                if self._stopping.is_set():
                    return
                log.warning("the index host (pid %d) exited with code %s; searches answer from keywords until "
                            "another starts (in %.1fs)", process.pid, process.exitcode, backoff)
            if time.monotonic() - started >= STEADY_SECONDS:
                backoff = BACKOFF_FIRST
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, BACKOFF_MAX)

    def stop(self, timeout: float = STOP_SECONDS) -> int | None:
        """SIGTERM the host and wait for it (SIGKILL after ``timeout``); its exit code. Only the
        supervising thread reaps the host (``join``): this waits on the process's sentinel, so two
        threads never race for the same child's exit status."""
        from multiprocessing.connection import wait

        with self._lock:
            self._stopping.set()
            process = self._process
        live = process is not None and process.exitcode is None  # not one that died and awaits its restart
        if live:
            with contextlib.suppress(OSError):
                process.terminate()
            if not wait([process.sentinel], timeout):
                log.warning("the index host (pid %d) did not stop within %gs; killing it", process.pid, timeout)
                with contextlib.suppress(OSError):
                    process.kill()
                wait([process.sentinel], 5)
        if self._thread is not None:
            self._thread.join(5)
        if not live:
            return None
        code = process.exitcode
        if code not in (0, None):
            log.warning("the index host (pid %d) stopped with exit code %s", process.pid, code)
        return code
