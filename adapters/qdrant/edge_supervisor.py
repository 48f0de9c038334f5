"""The child processes that build Qdrant Edge shards (``edge_build``), supervised.

The engine holds the GIL for a whole HNSW build (8 s for 20k x 384), so a large shard is built
in a process of its own from the stored embeddings while the live shard keeps serving. The
supervisor starts that process, streams the batches to it, turns its failure into
``VectorIndexError`` with the last line it printed, and kills it when the build is abandoned
(the collection dropped, the index closed, the caller cancelled): a half-built shard is
worthless, and the index manager builds again.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from adapters.qdrant.edge_build import MODULE, encode_frame
from domain.errors import VectorIndexError
from domain.vectors import PointBatch

_ROOT = str(Path(__file__).resolve().parents[2])


class BuildSupervisor:
    def __init__(self) -> None:
        self.children: dict[str, asyncio.subprocess.Process] = {}  # running builds by collection

    async def build(self, name: str, target: Path, argv: list[str], batches: AsyncIterator[PointBatch],
                    check_disk: Callable[[], None]) -> None:
        """Build collection ``name`` at ``target`` in a child (``argv``: its dimension and HNSW
        parameters), calling ``check_disk`` before each batch; returns once the child exited 0."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")])))
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", MODULE, "--parent", str(os.getpid()), str(target), *argv,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=env)
        self.children[name] = child
        assert child.stdin is not None and child.stderr is not None
        errors = asyncio.ensure_future(child.stderr.read())
        try:
            async for batch in batches:
                check_disk()
                child.stdin.write(encode_frame(batch.ids, batch.payloads, batch.vectors))
                await child.stdin.drain()
            child.stdin.close()
            status = await child.wait()
        except BaseException as error:
            await _kill(child)
            errors.cancel()
            if isinstance(error, (ConnectionError, BrokenPipeError)):
                raise VectorIndexError(f"the Qdrant Edge build of {name!r} stopped: {error}") from error
            raise
        finally:
            self.children.pop(name, None)
        text = (await errors).decode(errors="replace").strip()
        if status != 0:
            tail = text.splitlines()[-1:] or [f"exit status {status}"]
            raise VectorIndexError(f"the Qdrant Edge build of {name!r} failed: {tail[0]}")

    async def stop(self, name: str) -> None:
        """Kill the build of ``name``, if one runs."""
        child = self.children.pop(name, None)
        if child is not None:
            await _kill(child)

    async def stop_all(self) -> None:
        for child in list(self.children.values()):
            await _kill(child)
        self.children.clear()


async def _kill(child: asyncio.subprocess.Process) -> None:
    if child.returncode is None:
        child.kill()
        await child.wait()
