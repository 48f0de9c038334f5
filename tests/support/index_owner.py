"""A real index owner process for the contract suite: a Qdrant Edge index served over the socket.

``python -m tests.support.index_owner SOCKET QDRANT_DIR`` opens the Edge index at QDRANT_DIR,
serves it with ``IndexServer`` at SOCKET, prints ``ready`` and serves until SIGTERM or until its
stdin closes (the test process died). ``running_owner`` starts one and stops it.
"""

from __future__ import annotations

import asyncio
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

READY_SECONDS = 60


async def _serve(socket_path: str, qdrant_dir: str) -> None:
    from adapters.ipc.server import IndexServer
    from adapters.qdrant.edge import QdrantEdgeIndex

    index = QdrantEdgeIndex(qdrant_dir)
    server = IndexServer(index, socket_path)
    await server.start()
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_reader(sys.stdin.fileno(), lambda: done.set() if not sys.stdin.buffer.read1(1) else None)
    print("ready", flush=True)
    await done.wait()
    await server.close()
    await index.close()


@contextmanager
def running_owner(directory: Path) -> Iterator[Path]:
    """An owner serving an Edge index in ``directory``; yields its socket path."""
    socket_path = directory / "owner.sock"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.index_owner", str(socket_path), str(directory / "qdrant")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], READY_SECONDS)
        line = process.stdout.readline() if ready else ""
        if line.strip() != "ready":
            raise RuntimeError(f"the index owner did not start (exit {process.poll()}): {line!r}")
        yield socket_path
    finally:
        process.terminate()
        try:
            process.wait(READY_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], sys.argv[2]))
