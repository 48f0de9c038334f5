"""The cyclic garbage collector, set for a long-running serving process.

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
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def freeze_start_up() -> None:
    """Freeze what the process has built so far and space out young collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
