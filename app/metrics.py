"""``GET /metrics``: Prometheus metrics, in a registry owned by one app.

Request counts and latencies are observed as requests finish (by ``app.middleware``); search leg
latencies as ``SearchService`` runs them. Everything that lives in the stores — row counts,
vectors per collection, the embedding backlog — is read at scrape time, so a scrape always tells
the truth about the data, not about what this process happened to see. A registry per app (never
prometheus-client's global one) keeps apps built in the same process, as tests do, apart.
"""

from __future__ import annotations

import bisect
import functools
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime

from litestar import Response, get
from litestar.datastructures import State
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from app.routes.deps import errors
from domain.errors import DomainError
from domain.index_status import CONSISTENT, DIVERGED, REBUILDING, UNAVAILABLE, VERIFYING
from domain.indexing import IndexingService
from domain.models import parse_timestamp
from domain.vectors import COLLECTIONS

log = logging.getLogger("nexusai.metrics")

PREFIX = "memory"
# Request latencies span sub-millisecond reads to multi-second context builds.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LEG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# The classic text format every Prometheus understands; Litestar appends the charset.
MEDIA_TYPE = "text/plain; version=0.0.4"
INDEX_STATES = (CONSISTENT, VERIFYING, REBUILDING, DIVERGED, UNAVAILABLE)
UNMATCHED_ROUTE = "<unmatched>"  # 404s for unknown paths: one label, not one per probed URL


def shared_across_processes() -> bool:
    """True when prometheus-client keeps values in ``PROMETHEUS_MULTIPROC_DIR`` (multiprocess
    mode, decided when it was imported): with ``WORKERS`` > 1 the supervisor sets that directory
    before spawning, so every worker's counters add up whichever worker answers a scrape."""
    return bool(getattr(values.ValueClass, "_multiprocess", False))


class _AdmissionCollector(Collector):
    """Requests refused by admission control and those in flight right now (in this process)."""

    def __init__(self, admission, count_rejected: bool) -> None:
        self._admission = admission
        self._count_rejected = count_rejected

    def collect(self) -> Iterator[Metric]:
        if self._count_rejected:
            rejected = CounterMetricFamily(f"{PREFIX}_http_rejected_overload",
                                           "Requests refused with 503: too many in flight")
            rejected.add_metric([], self._admission.rejected)
            yield rejected
        in_flight = GaugeMetricFamily(f"{PREFIX}_http_requests_in_flight", "Requests being handled now")
        in_flight.add_metric([], self._admission.in_flight)
        yield in_flight


class _RequestSeries(Collector):
    """Request counts and latencies of one process, kept in plain lists and read at scrape time
    as the counter ``memory_http_requests`` and the histogram
    ``memory_http_request_duration_seconds`` (the same series prometheus-client's own would give).
    prometheus-client's ``inc`` and ``observe`` take a lock each and walk the buckets in Python:
    about 4 us of a request that costs 100 us in all; here it is a bisect and three additions.
    Only for one process: several workers' figures must add up, which needs prometheus-client's
    multiprocess files (``ServiceMetrics`` keeps its own metrics then)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self._bounds = list(buckets)
        # (method, route, status) -> [count, sum, created, per-bucket counts (the last: +Inf)]
        self._series: dict[tuple[str, str, int], list] = {}

    def observe(self, key: tuple[str, str, int], seconds: float) -> None:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0, 0.0, time.time(), [0] * (len(self._bounds) + 1)]
        series[0] += 1
        series[1] += seconds
        series[3][bisect.bisect_left(self._bounds, seconds)] += 1

    def describe(self) -> Iterator[Metric]:
        yield from self._families({})

    def collect(self) -> Iterator[Metric]:
        yield from self._families(dict(self._series))

    def _families(self, series: dict) -> Iterator[Metric]:
        names = ["method", "route", "status"]
        counts = CounterMetricFamily(f"{PREFIX}_http_requests", "HTTP requests by route template and status",
                                     labels=names)
        latency = HistogramMetricFamily(f"{PREFIX}_http_request_duration_seconds",
                                        "HTTP request latency by route template and status", labels=names)
        for (method, route, status), (count, total, created, buckets) in series.items():
            labels = [method, route or UNMATCHED_ROUTE, str(status)]
            counts.add_metric(labels, count, created=created)
            cumulative, running = [], 0
            for bound, n in zip([*map(_le, self._bounds), "+Inf"], buckets):
                running += n
                cumulative.append((bound, running))
            latency.add_metric(labels, cumulative, total)
            latency.samples.append(Sample(f"{latency.name}_created", dict(zip(names, labels)), created))
        yield counts
        yield latency


def _le(bound: float) -> str:
    return repr(float(bound))


class ServiceMetrics:
    """The metrics of one app. ``observe_request`` and ``observe_leg`` are cheap and synchronous;
    ``render(container)`` reads the stores and returns the exposition text.

    With several worker processes (``shared_across_processes()``) counters and histograms are
    summed over every worker that ever ran (prometheus-client's multiprocess files), the gauges
    read at scrape time are the scraping worker's fresh reading (``mostrecent``), and the
    collectors added with ``add_collector`` (requests in flight, which worker answered) are the
    answering worker's own."""

    def __init__(self) -> None:
        self.shared = shared_across_processes()
        self.registry = CollectorRegistry(auto_describe=True)
        self._collectors: list[Collector] = []  # read at scrape time from this process's objects
        r = self.registry
        # Gauges read at scrape time: the newest reading, whichever worker took it.
        gauge = functools.partial(Gauge, registry=r, multiprocess_mode="mostrecent")
        if self.shared:
            self.requests = Counter(f"{PREFIX}_http_requests", "HTTP requests by route template and status",
                                    ["method", "route", "status"], registry=r)
            self.request_seconds = Histogram(f"{PREFIX}_http_request_duration_seconds",
                                             "HTTP request latency by route template and status",
                                             ["method", "route", "status"], buckets=REQUEST_BUCKETS, registry=r)
            self._series: _RequestSeries | None = None
        else:
            self._series = _RequestSeries(REQUEST_BUCKETS)
            r.register(self._series)
        self.leg_seconds = Histogram(f"{PREFIX}_search_leg_duration_seconds",
                                     "Latency of one retrieval leg (vector or keyword) of a search",
                                     ["leg"], buckets=LEG_BUCKETS, registry=r)
        self.rows = gauge(f"{PREFIX}_store_rows", "Rows per table in the store (read at scrape)", ["table"])
        self.vectors = gauge(f"{PREFIX}_vector_points", "Points per vector collection (read at scrape)",
                             ["collection"])
        self.backlog = gauge(f"{PREFIX}_embedding_backlog_jobs", "Outbox jobs not yet applied to the vector index")
        self.backlog_dead = gauge(f"{PREFIX}_embedding_backlog_dead_jobs",
                                  "Dead-lettered outbox jobs (given up on; memory-service dead-letters)")
        self.client_closed = Counter(f"{PREFIX}_http_client_disconnects",
                                     "Requests whose client went away before the answer (logged as 499)",
                                     ["method", "route"], registry=r)
        self.backlog_failing = gauge(f"{PREFIX}_embedding_backlog_failing_jobs",
                                     "Outbox jobs that failed at least once")
        self.backlog_age = gauge(f"{PREFIX}_embedding_backlog_oldest_age_seconds",
                                 "Age of the oldest pending outbox job (0 when the backlog is empty)")
        self.store_up = gauge(f"{PREFIX}_store_up", "1 when the store answered the scrape")
        self.vector_index_up = gauge(f"{PREFIX}_vector_index_up", "1 when the vector index answered the scrape")
        self.index_state = gauge(f"{PREFIX}_vector_index_state",
                                 "1 for the state each vector collection is in (consistent, verifying, rebuilding, "
                                 "diverged, unavailable)", ["collection", "state"])
        self.index_progress = gauge(f"{PREFIX}_vector_index_build_progress",
                                    "Share done of the generation being built (0 when none is)", ["collection"])
        self.index_disk_low = gauge(f"{PREFIX}_vector_index_disk_low",
                                    "1 while the index volume is below its free-space reserve")
        self.embed_calls = Counter(f"{PREFIX}_embed_calls", "Embedding calls made by the worker", registry=r)
        self.embed_failures = Counter(f"{PREFIX}_embed_failures", "Embedding calls that failed", registry=r)
        self.dead_lettered = Counter(f"{PREFIX}_embedding_dead_lettered",
                                     "Outbox jobs the embedding worker gave up on (dead letters)", registry=r)
        # Counted where it happens when several processes serve (a per-process count read at
        # scrape time would jump between workers); read from the gate in one process.
        self.rejected = Counter(f"{PREFIX}_http_rejected_overload", "Requests refused with 503: too many in flight",
                                registry=r) if self.shared else None
        self._indexing_registered = False
        self._exposed: CollectorRegistry | None = None
        # (method, route, status) -> its counter and histogram children: ``labels()`` validates
        # and locks on every call, a measurable share of a fast request. Grows with the series.
        self._request_children: dict[tuple[str, str, int], tuple] = {}

    def watch_admission(self, admission) -> None:
        """Expose admission control's counters (once per app)."""
        if self.rejected is not None:
            admission.on_reject = self.rejected.inc
        self.add_collector(_AdmissionCollector(admission, count_rejected=self.rejected is None))

    def add_collector(self, collector: Collector) -> None:
        """A collector read at scrape time from this process (with several workers: the
        answering worker's own figures)."""
        self._collectors.append(collector)
        self.registry.register(collector)
        self._exposed = None

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        if status == 499:  # the client hung up: not a request we answered, not a server error
            self.client_closed.labels(method, route or UNMATCHED_ROUTE).inc()
            return
        key = (method, route, status)
        if self._series is not None:
            self._series.observe(key, seconds)
            return
        children = self._request_children.get(key)
        if children is None:
            labels = (method, route or UNMATCHED_ROUTE, str(status))
            children = self._request_children[key] = (self.requests.labels(*labels),
                                                       self.request_seconds.labels(*labels))
        children[0].inc()
        children[1].observe(seconds)

    def observe_leg(self, leg: str, seconds: float) -> None:
        self.leg_seconds.labels(leg).observe(seconds)

    def watch_indexing(self, indexing: IndexingService) -> None:
        """Count ``indexing``'s embed calls, failures and dead letters as they happen (once; the
        container calls it)."""
        if not self._indexing_registered:
            counters = {"embed_calls": self.embed_calls, "embed_failures": self.embed_failures,
                        "dead_lettered": self.dead_lettered}
            indexing.count_with(lambda name: counters[name].inc())
            self._indexing_registered = True

    async def refresh(self, container) -> None:
        """Read row counts, vector counts and the backlog into the gauges. A store or index that
        fails is reported as down (``*_up 0``), never as a failed scrape."""
        store = container.store()
        try:
            for table, count in (await store.operations.counts()).items():
                self.rows.labels(table).set(count)
            backlog = await store.outbox.backlog()
            self.backlog.set(backlog.pending)
            self.backlog_failing.set(backlog.failing)
            self.backlog_dead.set(backlog.dead)
            age = 0.0
            if backlog.pending and backlog.oldest_created_at:
                age = (datetime.now(UTC) - parse_timestamp(backlog.oldest_created_at)).total_seconds()
            self.backlog_age.set(max(0.0, age))
            self.store_up.set(1)
        except DomainError as exc:
            log.warning("metrics: the store did not answer: %s", exc.message)
            self.store_up.set(0)
        manager = container.index_manager()
        up = 1
        for name in COLLECTIONS:
            try:
                self.vectors.labels(name).set(await manager.count(name))
            except DomainError:
                up = 0
        self.vector_index_up.set(up)
        status = manager.status()
        self.index_disk_low.set(1 if status["diskLow"] else 0)
        for name, collection in status["collections"].items():
            for word in INDEX_STATES:
                self.index_state.labels(name, word).set(1 if collection["state"] == word else 0)
            progress = collection["progress"]
            self.index_progress.labels(name).set(progress["percent"] / 100 if progress else 0)

    def exposed(self) -> CollectorRegistry:
        """What a scrape renders: this app's registry, or with several workers the sum of every
        worker's files plus this worker's own collectors."""
        if not self.shared:
            return self.registry
        if self._exposed is None:
            exposed = CollectorRegistry(auto_describe=True)
            MultiProcessCollector(exposed)
            for collector in self._collectors:
                exposed.register(collector)
            self._exposed = exposed
        return self._exposed

    async def render(self, container) -> bytes:
        await self.refresh(container)
        return generate_latest(self.exposed())


@get("/metrics", summary="Prometheus metrics", tags=["operations"], media_type=MEDIA_TYPE, responses=errors(),
     description="Request counts and latency by route template and status, search leg latency, embed calls and "
                 "failures, the embedding backlog (size and age), and row and vector counts read at scrape time. "
                 "Needs the API key when MEMORY_API_KEY is set.")
async def metrics(state: State) -> Response[bytes]:
    body = await state.metrics.render(state.container)
    return Response(body, media_type=MEDIA_TYPE)
