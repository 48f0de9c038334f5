"""A simulated power cut: an ext4 file system on a loop device, snapshotted at the cut.

The "disk" is an image file attached to a loop device and mounted with a long journal commit
interval (``commit=60``). The image holds exactly what ext4 has sent to its block device: data a
process ``fsync``-ed, and whatever the kernel's writeback happened to flush. Data that is only in
the page cache of the mounted file system is not in it. So a power cut is:

    disk = LoopDisk.create(tmp_path / "disk")   # mkfs.ext4 + losetup + mount
    ...  processes write under disk.mount ...
    kill -9 every process using it               # nothing more reaches the page cache
    disk.power_cut()                             # copy the image, drop the old mount, mount the copy

``power_cut`` copies the image file at once (``cp --sparse=always``: a few milliseconds), then
unmounts and detaches the original, deletes it, and mounts the copy at the same path (the machine
"boots" on the disk the outage left): the kernel replays ext4's journal as it would after a real
outage, and the page cache of the old mount is gone with it. What the copy lacks is what a real
power cut would have lost. (No device-mapper here, so no dm-flakey: the copy is the cut.)

How faithful it is, and the one window it leaves: the kernel writes dirty pages back after
``vm.dirty_expire_centisecs`` (30 s by default; a global setting this module does not touch) or
under memory pressure, and the journal commits every 60 s or at an ``fsync``. Between the kill
and the end of the copy (milliseconds) such a flush can still reach the image, as it could have
reached a real disk a moment before the power failed. It only ever adds writes the kernel already
held for the disk, never invents any, so it can flatter a test by those milliseconds at most.
``tests/e2e/test_power_loss.py`` proves the cut bites: a file written without ``fsync`` just
before the cut is missing or short on the copy, and one written with ``fsync`` is whole.

Needs root (``losetup``, ``mount``) and ``mkfs.ext4`` (e2fsprogs), ``losetup``/``mount``
(util-linux). ``loop_disk_unavailable()`` says why when it cannot run. Every mount and loop
device is released in ``close()`` (lazy unmount, detach), which never raises.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

TOOLS = ("mkfs.ext4", "losetup", "mount", "umount", "cp")
MOUNT_OPTIONS = "commit=60"  # the journal commits only at an fsync (or a minute later)


class LoopDiskError(RuntimeError):
    """A loop device or mount could not be set up; carries the command's output."""


def _run(*command: str, timeout: float = 60.0) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise LoopDiskError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip() or done.stdout}")
    return done.stdout.strip()


def is_root() -> bool:
    return os.geteuid() == 0


def loop_disk_unavailable() -> str | None:
    """Why a loop-mounted ext4 cannot be made here (a missing tool), or None when it can.

    Root is checked apart (``is_root``); either missing fails the test, naming it: CI runs as root,
    and a skipped power-cut test proves nothing."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return (f"the power-cut test needs {', '.join(missing)} (packages e2fsprogs, util-linux, coreutils); "
                "install them (.ci/run does on a machine that lacks them)")
    if not Path("/dev/loop-control").exists():
        return "the power-cut test needs loop devices: /dev/loop-control is missing (modprobe loop)"
    return None


class LoopDisk:
    """One ext4 file system on a loop device whose backing image is ``root/<name>.img``,
    mounted at ``root/mnt``."""

    def __init__(self, root: Path, image: Path) -> None:
        self.root = root
        self.image = image
        self.mount = root / "mnt"
        self.device: str | None = None
        self.mounted = False
        self.cuts = 0

    # -- life cycle -------------------------------------------------------------------------------
    @classmethod
    def create(cls, root: str | os.PathLike[str], size_mb: int = 256) -> LoopDisk:
        """A fresh, empty, mounted file system. Inode tables and journal are initialised by mkfs
        (no lazy-init thread writing behind the test's back)."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        disk = cls(root, root / "disk-0.img")
        with open(disk.image, "wb") as image:
            image.truncate(size_mb * 1024 * 1024)  # sparse
        _run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(disk.image))
        disk._attach_and_mount()
        return disk

    def power_cut(self) -> None:
        """Replace this disk by the one the power failure left, mounted at the same path (its
        journal replayed on mount).

        Kill every process writing here first: a process still running would go on filling the
        page cache of a mount that is about to vanish."""
        self.cuts += 1
        copy = self.root / f"disk-{self.cuts}.img"
        # The cut: the image as it is now is what reached the "disk". Copied before anything
        # else (unmounting would write back the page cache and commit the journal).
        _run("cp", "--sparse=always", str(self.image), str(copy))
        self.close()
        self.image.unlink(missing_ok=True)
        self.image = copy
        self._attach_and_mount()

    def close(self) -> None:
        """Unmount (lazily if busy) and detach; never raises (for teardown)."""
        if self.mounted:
            done = subprocess.run(["umount", str(self.mount)], capture_output=True, timeout=60)
            if done.returncode != 0:
                subprocess.run(["umount", "-l", str(self.mount)], capture_output=True, timeout=60)
            self.mounted = False
        if self.device:
            # A device still held (a lazy unmount) is detached when its last user lets go.
            subprocess.run(["losetup", "-d", self.device], capture_output=True, timeout=60)
            self.device = None

    def __enter__(self) -> LoopDisk:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------------
    def _attach_and_mount(self) -> None:
        self.device = _run("losetup", "--find", "--show", str(self.image))
        try:
            self.mount.mkdir(parents=True, exist_ok=True)
            _run("mount", "-t", "ext4", "-o", MOUNT_OPTIONS, self.device, str(self.mount))
            self.mounted = True
        except BaseException:
            self.close()
            raise


def kill_process_group(pid: int) -> None:
    """SIGKILL the whole process group led by ``pid`` (a server started in its own session, with
    its workers and index builders): at a power cut every process stops at the same instant."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
