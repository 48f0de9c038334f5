"""``GET /metrics``: Prometheus metrics, in a registry owned by one app.

Request counts and latencies are observed as requests finish (by ``app.middleware``); search leg
latencies as ``SearchService`` runs them. Everything that lives in the stores — row counts,
vectors per collection, the embedding backlog — is read at scrape time, so a scrape always tells
the truth about the data, not about what this process happened to see. A registry per app (never
prometheus-client's global one) keeps apps built in the same process, as tests do, apart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime

from litestar import Response, get
from litestar.datastructures import State
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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


class _IndexingCollector(Collector):
    """Embedder counters straight from ``IndexingService`` (it counts; we only expose)."""

    def __init__(self, indexing: IndexingService) -> None:
        self._indexing = indexing

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(f"{PREFIX}_embed_calls", "Embedding calls made by the worker")
        calls.add_metric([], self._indexing.embed_calls)
        failures = CounterMetricFamily(f"{PREFIX}_embed_failures", "Embedding calls that failed")
        failures.add_metric([], self._indexing.embed_failures)
        buried = CounterMetricFamily(f"{PREFIX}_embedding_dead_lettered",
                                     "Outbox jobs this process gave up on (dead letters)")
        buried.add_metric([], self._indexing.dead_lettered)
        yield calls
        yield failures
        yield buried


class _AdmissionCollector(Collector):
    """Requests refused by admission control and those in flight right now."""

    def __init__(self, admission) -> None:
        self._admission = admission

    def collect(self) -> Iterator[Metric]:
        rejected = CounterMetricFamily(f"{PREFIX}_http_rejected_overload", "Requests refused with 503: too many in flight")
        rejected.add_metric([], self._admission.rejected)
        in_flight = GaugeMetricFamily(f"{PREFIX}_http_requests_in_flight", "Requests being handled now")
        in_flight.add_metric([], self._admission.in_flight)
        yield rejected
        yield in_flight


class ServiceMetrics:
    """The metrics of one app. ``observe_request`` and ``observe_leg`` are cheap and synchronous;
    ``render(container)`` reads the stores and returns the exposition text."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(f"{PREFIX}_http_requests", "HTTP requests by route template and status",
                                ["method", "route", "status"], registry=r)
        self.request_seconds = Histogram(f"{PREFIX}_http_request_duration_seconds",
                                         "HTTP request latency by route template and status",
                                         ["method", "route", "status"], buckets=REQUEST_BUCKETS, registry=r)
        self.leg_seconds = Histogram(f"{PREFIX}_search_leg_duration_seconds",
                                     "Latency of one retrieval leg (vector or keyword) of a search",
                                     ["leg"], buckets=LEG_BUCKETS, registry=r)
        self.rows = Gauge(f"{PREFIX}_store_rows", "Rows per table in the store (read at scrape)", ["table"],
                          registry=r)
        self.vectors = Gauge(f"{PREFIX}_vector_points", "Points per vector collection (read at scrape)",
                             ["collection"], registry=r)
        self.backlog = Gauge(f"{PREFIX}_embedding_backlog_jobs", "Outbox jobs not yet applied to the vector index",
                             registry=r)
        self.backlog_dead = Gauge(f"{PREFIX}_embedding_backlog_dead_jobs",
                                  "Dead-lettered outbox jobs (given up on; memory-service dead-letters)", registry=r)
        self.client_closed = Counter(f"{PREFIX}_http_client_disconnects",
                                     "Requests whose client went away before the answer (logged as 499)",
                                     ["method", "route"], registry=r)
        self.backlog_failing = Gauge(f"{PREFIX}_embedding_backlog_failing_jobs",
                                     "Outbox jobs that failed at least once", registry=r)
        self.backlog_age = Gauge(f"{PREFIX}_embedding_backlog_oldest_age_seconds",
                                 "Age of the oldest pending outbox job (0 when the backlog is empty)", registry=r)
        self.store_up = Gauge(f"{PREFIX}_store_up", "1 when the store answered the scrape", registry=r)
        self.vector_index_up = Gauge(f"{PREFIX}_vector_index_up", "1 when the vector index answered the scrape",
                                     registry=r)
        self.index_state = Gauge(f"{PREFIX}_vector_index_state",
                                 "1 for the state each vector collection is in (consistent, verifying, rebuilding, "
                                 "diverged, unavailable)", ["collection", "state"], registry=r)
        self.index_progress = Gauge(f"{PREFIX}_vector_index_build_progress",
                                    "Share done of the generation being built (0 when none is)", ["collection"],
                                    registry=r)
        self.index_disk_low = Gauge(f"{PREFIX}_vector_index_disk_low",
                                    "1 while the index volume is below its free-space reserve", registry=r)
        self._indexing_registered = False
        # (method, route, status) -> its counter and histogram children: ``labels()`` validates
        # and locks on every call, a measurable share of a fast request. Grows with the series.
        self._request_children: dict[tuple[str, str, int], tuple] = {}

    def watch_admission(self, admission) -> None:
        """Expose admission control's counters (once per app)."""
        self.registry.register(_AdmissionCollector(admission))

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        if status == 499:  # the client hung up: not a request we answered, not a server error
            self.client_closed.labels(method, route or UNMATCHED_ROUTE).inc()
            return
        key = (method, route, status)
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
        """Expose ``indexing``'s embed counters (once; the lifespan calls it)."""
        if not self._indexing_registered:
            self.registry.register(_IndexingCollector(indexing))
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

    async def render(self, container) -> bytes:
        await self.refresh(container)
        return generate_latest(self.registry)


@get("/metrics", summary="Prometheus metrics", tags=["operations"], media_type=MEDIA_TYPE, responses=errors(),
     description="Request counts and latency by route template and status, search leg latency, embed calls and "
                 "failures, the embedding backlog (size and age), and row and vector counts read at scrape time. "
                 "Needs the API key when MEMORY_API_KEY is set.")
async def metrics(state: State) -> Response[bytes]:
    body = await state.metrics.render(state.container)
    return Response(body, media_type=MEDIA_TYPE)
