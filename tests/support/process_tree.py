"""The processes of a running ``memory-service serve``, read from /proc (Linux).

``serve`` is one process on the embedded engines (with a short-lived index build child at times),
or uvicorn's supervisor and its workers where the engines are shared."""

from __future__ import annotations

import os
import time
from pathlib import Path

def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def children(parent: int) -> set[int]:
    """Every live child of ``parent``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) and int(fields[1]) == parent \
                and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def tree(root: int) -> set[int]:
    """``root`` and all its live descendants."""
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children(pid))
    return {pid for pid in found if alive(pid)}


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def until(predicate, what: str, timeout: float = 60.0):
    """Poll ``predicate`` until it returns something true (bounded); returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := predicate()):
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
