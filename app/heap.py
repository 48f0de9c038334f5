"""The heap of a long-running serving process: glibc's malloc arenas and the cyclic garbage
collector.

``limit_malloc_arenas`` runs first thing in ``serve`` (and in each worker it spawns). glibc gives
a thread that finds the arena it last used busy an arena of its own, up to 8 per core, and each
arena keeps the memory freed into it for reuse instead of returning it to the system. A serving
process has a dozen threads that allocate (the event loop, the embedding worker's model passes,
the SQLite and index threads, the engines' own pools), so its resident memory grew by a share of
freed arena memory per thread. ``MALLOC_ARENAS`` caps the number (glibc only; elsewhere, and with
0, the allocator is left as it is). The threads then share the arenas, under a lock they seldom
contend for: the allocations that matter here are few and large.

CPython's collector stops the whole process while it walks every tracked object of the generations
it collects. The oldest generation holds what start-up built — imported modules, Litestar's
routes and signature models, msgspec types, the container — and a full collection walked all of
it again: in a serving process under the mixed load of ``bench/hardening.py`` each one stopped it
for 110-160 ms (measured with ``gc.callbacks``), which was the whole tail of ``/health`` at 64-256
connections (p99 ~150 ms; with what follows ~20-45 ms).

``freeze_start_up`` runs when start-up is done, and again once an in-process embedding model (which loads
in the background after start-up) has loaded — a second freeze takes only what was built since:

- ``gc.collect()`` then ``gc.freeze()``: what survived start-up moves to the permanent generation,
  which no collection walks again. A full collection then walks only what was made since
  (10-20 ms under the same load). Nothing is lost: what start-up built lives as long as the
  process; only a cycle among start-up objects that became garbage later stays (once, bounded).
- the youngest generation is collected every ``YOUNG_THRESHOLD`` net allocations instead of 700:
  a request allocates a few hundred tracked objects, so at 700 nearly every request paid for a
  young collection and every tenth for a middle one.

``return_freed_memory`` runs every ``TRIM_SECONDS`` in a serving process. glibc gives memory back to
the system only from the top of its heap: what a burst freed below a block still in use (an
embedding pass's token arrays and activations, an index build's batches) stays resident. After
20,000 episodes were embedded, ``malloc_trim(0)`` gave back 35-36 MB of 224 MB anonymous memory.
It runs on a thread (ctypes lets go of the GIL for the call), so requests mostly go on meanwhile.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import gc
import logging
import os
import platform

log = logging.getLogger("nexusai.heap")

YOUNG_THRESHOLD = 10_000
TRIM_SECONDS = 30.0
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


@functools.cache  # libc_ver reads the interpreter's binary to tell: once per process is enough
def _glibc() -> ctypes.CDLL | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:  # no symbol table to search
        return None


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas at ``arenas`` for the threads made from now on; True when set.
    Nothing on another C library, nothing for 0 (glibc's own default, 8 per core), and nothing
    when the environment sets glibc's own ``MALLOC_ARENA_MAX``: an operator's explicit choice wins."""
    if arenas <= 0 or "MALLOC_ARENA_MAX" in os.environ or (libc := _glibc()) is None:
        return False
    try:
        return libc.mallopt(_M_ARENA_MAX, arenas) == 1
    except AttributeError:  # a libc without mallopt
        return False


def trim() -> bool:
    """Give the memory glibc holds freed back to the system (``malloc_trim``); True when some was."""
    libc = _glibc()
    try:
        return libc is not None and libc.malloc_trim(0) == 1
    except AttributeError:
        return False


async def return_freed_memory() -> None:
    """``trim`` every ``TRIM_SECONDS``, on a thread, until cancelled (see the module)."""
    while True:
        await asyncio.sleep(TRIM_SECONDS)
        try:
            await asyncio.to_thread(trim)
        except Exception:  # an allocator that refuses the call: serving goes on untrimmed, said once
            log.warning("giving freed heap memory back failed; no further attempts", exc_info=True)
            return


def freeze_start_up() -> None:
    """Freeze what the process has built so far and space out young collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
