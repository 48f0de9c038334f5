"""Who holds a Qdrant Edge shard's lock, and clearing it when the holder is our own orphan.

The engine takes an ``flock`` on the shard's WAL; the kernel drops it when the holder dies, so a
lock that blocks us is held by a live process. If that process is a build child
(``edge_build``) whose service is gone (its ``--parent`` pid no longer runs), it is an orphan
from a version without the parent-death signal: it is killed and the lock clears. Any other
holder (another service, an operator's tool) is left alone and named in the error.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from adapters.qdrant.edge_build import MODULE


def _key(stat: os.stat_result) -> tuple[int, int, int]:
    return os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino


def lock_holders(shard: Path) -> list[int]:
    """Pids holding a lock on any file of ``shard`` (from /proc/locks; empty where unreadable)."""
    try:
        # The engine locks its WAL directory; files and directories alike may carry a lock.
        inodes = {_key(p.stat()) for p in [shard, *shard.rglob("*")]}
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    holders = []
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        try:
            major, minor, ino = fields[5].split(":")
            pid, inode = int(fields[4]), (int(major, 16), int(minor, 16), int(ino))
        except (IndexError, ValueError):
            continue
        if inode in inodes and pid not in holders:
            holders.append(pid)
    return holders


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def describe(pid: int) -> str:
    return f"pid {pid} ({' '.join(_cmdline(pid)).strip()[:120] or 'gone'})"


def is_orphan_build(pid: int) -> bool:
    args = _cmdline(pid)
    if MODULE not in args or "--parent" not in args:
        return False
    try:
        parent = int(args[args.index("--parent") + 1])
    except (IndexError, ValueError):
        return False
    return not _alive(parent)


def clear_orphans(shard: Path, wait: float = 5.0) -> bool:
    """Kill orphaned build children holding ``shard``; True when one was killed (retry the open)."""
    killed = [pid for pid in lock_holders(shard) if is_orphan_build(pid)]
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    while killed and any(_alive(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(killed)
