"""Which short reads usually run over their budget on the event loop (see ``SqliteDatabase.read_short``).

A read tried on the loop and stopped at its step budget has cost those steps for nothing. Some
reads overflow now and then (a keyword search for a frequent word): they stay on the loop. Some
overflow nearly always (any keyword search once the store is large): after a few, they go to a
reader thread at once, and one in ``PROBE_EVERY`` is tried on the loop again, so a read that
becomes short again (a smaller store, a cache now warm) comes back.

Only while no other read is on the reader threads, though (``pooled``: reads handed to the pool and
not yet answered). A read on the loop holds it for up to its whole budget; with requests in flight
that wait falls on every other request, ``/health`` included (measured at 64-256 connections:
/health p50 8-10 ms with every read on the pool, 38-62 ms with short reads on the loop, p99 0.15 vs
1.0 s). Concurrent reads go to the pool, where they also overlap; a lone read (one client, an idle
service) still saves the hop.
"""

from __future__ import annotations

PROBE_EVERY = 16
_KEEP = 0.875  # the weight of the past in each code's overflow rate (a moving average)


class OverflowRates:
    """A moving overflow rate per read code (``fn.__code__``: one per call site), on the loop thread."""

    __slots__ = ("_rates", "pooled")

    def __init__(self) -> None:
        self._rates: dict[object, list] = {}  # code -> [overflow rate, reads sent to the pool since]
        self.pooled = 0  # reads on the reader threads now (counted by SqliteDatabase.read)

    def inline(self, site: object) -> bool:
        """Whether to try this read on the loop: not while other reads are on the pool, nor when its
        code mostly overflows (then one in ``PROBE_EVERY``)."""
        if self.pooled:
            return False
        state = self._rates.get(site)
        if state is None or state[0] < 0.5 or state[1] >= PROBE_EVERY - 1:
            return True
        state[1] += 1
        return False

    def record(self, site: object, overflowed: bool) -> None:
        state = self._rates.get(site)
        if state is None:
            if not overflowed:
                return  # never overflowed: nothing to remember
            state = self._rates[site] = [0.0, 0]
        state[0] = state[0] * _KEEP + (1 - _KEEP) * overflowed
        state[1] = 0

    def rate(self, site: object) -> float:
        state = self._rates.get(site)
        return 0.0 if state is None else state[0]
