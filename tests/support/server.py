"""A real ``memory-service serve`` process for e2e tests, crash tests and benchmarks.

    with ServiceProcess(service_env(tmp_path / "memory.db", {"EMBEDDER": "hash"})) as server:
        httpx.get(f"{server.url}/health")
        server.stop()            # SIGTERM, bounded wait, returns the exit code
        server.start()           # same port, same files
        server.kill()            # kill -9: no shutdown code runs

Every wait is bounded. When the process fails to come up, exits early or ignores SIGTERM, the
error carries the tail of its stderr, so a failing test says why the server died. stdout and
stderr go to files (not pipes): a chatty server can never block on a full pipe buffer.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

# Variables the service reads; the parent's values must never leak into a test server.
SERVICE_VARIABLES = (
    "PORT", "HOST", "SQLITE_PATH", "STORE", "DATABASE_URL", "VECTOR_INDEX", "QDRANT_URL", "QDRANT_PATH", "QDRANT_API_KEY",
    "EMBEDDER", "EMBEDDING_SERVICE_URL", "OLLAMA_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "EMBEDDING_MODEL",
    "EMBEDDING_DIM", "EMBEDDING_TIMEOUT", "EMBEDDING_BATCH", "EMBEDDING_WORKER", "MEMORY_API_KEY",
    "DEFAULT_RANKER", "RRF_K", "WEIGHTED_ALPHA", "RECENCY_HALF_LIFE_DAYS", "MMR_LAMBDA", "LOG_LEVEL",
    "LOG_FORMAT", "MAX_BODY_BYTES", "SQLITE_SYNCHRONOUS", "MAX_IN_FLIGHT", "CORS_ORIGINS", "EMBEDDING_MAX_ATTEMPTS",
    "HEALTH_INTERVAL", "MIN_FREE_DISK_MB",
    "INDEX_VERIFY_SECONDS", "INDEX_CHECK_SECONDS", "INDEX_OPTIMIZE_EVERY",
    "INDEX_INLINE_BUILD_POINTS", "INDEX_DISK_RESERVE_MB", "WORKERS", "IDEMPOTENCY_KEY_SECONDS",
)
STORE_DATABASE_VARIABLE = "TEST_E2E_DATABASE_URL"
STDERR_TAIL = 4000  # characters of stderr quoted in an error
_ADDRESS_IN_USE = ("address already in use", "errno 98", "errno 48")


class ServiceProcessError(RuntimeError):
    """The server did not start, died early, or did not stop when asked; carries its stderr."""

    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(f"{message}\n--- server stderr (tail) ---\n{stderr[-STDERR_TAIL:]}")
        self.stderr = stderr


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's pick; another process may take it later,
    which ``ServiceProcess.start`` survives by retrying on a fresh port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def service_command() -> list[str]:
    """``memory-service`` from the running interpreter's environment (the project's venv)."""
    script = Path(sys.executable).with_name("memory-service")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "app.cli"]


def service_env(
    sqlite_path: str | os.PathLike[str] | None, variables: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The parent's environment without any service variable, plus ``SQLITE_PATH`` (unless None)
    and ``variables`` (e.g. ``{"EMBEDDER": "ollama"}``). The hash embedder at dimension 64 is the
    default: it needs no other service."""
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARIABLES}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["EMBEDDER"] = "hash"
    env["EMBEDDING_DIM"] = "64"
    env["LOG_LEVEL"] = "warning"
    env["HEALTH_INTERVAL"] = "0.1"  # tests poll /health for what they wrote: keep the checks frequent
    # One process unless a test asks for more: a test whose configuration allows several workers
    # (a Qdrant server as the index) still looks at that process (its pid, its signals, its
    # children). The default on the embedded engines is checked by tests/e2e/test_one_process.py.
    env["WORKERS"] = "1"
    if sqlite_path is not None:
        env["SQLITE_PATH"] = str(sqlite_path)
    # Under TEST_STORE=postgres the e2e fixture names a fresh database for the test here: the
    # service runs on it unless the test chose its store itself.
    database = os.environ.get(STORE_DATABASE_VARIABLE)
    if database and "STORE" not in (variables or {}):
        env.update(STORE="postgres", DATABASE_URL=database)
    env.update(variables or {})
    return env


def run_service(
    args: Sequence[str], env: Mapping[str, str], *, cwd: str | os.PathLike[str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run one ``memory-service`` command to completion (bounded), capturing its output.

    ``cwd`` defaults to a fresh empty directory so a developer's ``.env`` is never read."""
    with tempfile.TemporaryDirectory(prefix="memory-service-") as scratch:
        return subprocess.run(
            [*service_command(), *args], env=dict(env), cwd=cwd or scratch, capture_output=True, text=True,
            timeout=timeout, stdin=subprocess.DEVNULL,
        )


class ServiceProcess:
    """One ``memory-service serve`` process (or ``verb``, e.g. ``("mcp", "--transport",
    "streamable-http")``: any command that takes ``--host``/``--port`` and answers ``GET /health``);
    start/stop/kill it as often as needed.

    The port is chosen once (a free one unless given) and kept across restarts, so clients can
    keep their base URL. ``cwd`` defaults to the directory of ``SQLITE_PATH`` so no ``.env`` from
    the repository is read."""

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        cwd: str | os.PathLike[str] | None = None,
        command: Sequence[str] | None = None,
        verb: Sequence[str] = ("serve",),
        startup_timeout: float = 60.0,
        log_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.env = dict(env)
        self.host = host
        self.port = port or free_port(host)
        self._fixed_port = port is not None
        sqlite_path = self.env.get("SQLITE_PATH", ":memory:")
        sqlite_dir = Path(sqlite_path).parent if sqlite_path != ":memory:" else None
        self.cwd = Path(cwd) if cwd else (sqlite_dir or Path(tempfile.mkdtemp(prefix="memory-service-")))
        self.command = list(command or service_command())
        self.verb = list(verb)
        self.startup_timeout = startup_timeout
        self._log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="memory-service-logs-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr_path: Path | None = None
        self._runs = 0

    # -- state ------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process else None

    def stderr(self) -> str:
        """Everything the current (or last) run wrote to stderr."""
        if self._stderr_path is None or not self._stderr_path.exists():
            return ""
        return self._stderr_path.read_text(errors="replace")

    # -- life cycle -------------------------------------------------------------------------------
    def start(self, attempts: int = 3) -> ServiceProcess:
        """Spawn the server and return once ``GET /health`` answers; raises ``ServiceProcessError``
        (with stderr) when it exits or does not answer within ``startup_timeout``."""
        if self.running:
            raise RuntimeError(f"the server is already running (pid {self.pid})")
        for attempt in range(attempts):
            self._spawn()
            try:
                self._wait_until_healthy()
                return self
            except ServiceProcessError as exc:
                lost_port = any(marker in exc.stderr.lower() for marker in _ADDRESS_IN_USE)
                if not lost_port or self._fixed_port or attempt == attempts - 1:
                    raise
                self.port = free_port(self.host)  # someone took the port between pick and bind
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for a graceful exit; returns the exit code. A server still alive after
        ``timeout`` is killed and ``ServiceProcessError`` raised."""
        return self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self, timeout: float = 30.0) -> int:
        """kill -9: the process gets no chance to flush or close anything."""
        return self._signal_and_wait(signal.SIGKILL, timeout)

    def restart(self) -> ServiceProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server if it is still running; never raises (for fixture teardown)."""
        if not self.running:
            return
        try:
            self.stop(timeout=15.0)
        except ServiceProcessError:
            pass  # stop() already killed it

    # -- internals --------------------------------------------------------------------------------
    def _spawn(self) -> None:
        self._runs += 1
        self._stderr_path = self._log_dir / f"server-{self.port}-{self._runs}.stderr"
        stdout_path = self._log_dir / f"server-{self.port}-{self._runs}.stdout"
        command = [*self.command, *self.verb, "--host", self.host, "--port", str(self.port)]
        with open(self._stderr_path, "wb") as err, open(stdout_path, "wb") as out:
            # start_new_session: a Ctrl-C in the test runner must not reach the server first.
            self._process = subprocess.Popen(
                command, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True,
            )

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self._process.poll() if self._process else None
                if code is not None:
                    raise ServiceProcessError(f"the server exited with code {code} before answering /health",
                                              self.stderr())
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    self._force_kill()
                    raise ServiceProcessError(
                        f"the server did not answer /health at {self.url} within {self.startup_timeout}s",
                        self.stderr(),
                    )
                time.sleep(0.05)

    def _signal_and_wait(self, signum: signal.Signals, timeout: float) -> int:
        process = self._process
        if process is None:
            raise RuntimeError("the server was never started")
        if process.poll() is None:
            process.send_signal(signum)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._force_kill()
            raise ServiceProcessError(
                f"the server (pid {process.pid}) did not exit within {timeout}s of {signum.name}", self.stderr()
            ) from None

    def _force_kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=30.0)
