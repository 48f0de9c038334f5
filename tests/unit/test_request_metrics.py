"""Request counts and latencies of one process: the series prometheus-client's own Counter and
Histogram would expose, from ``ServiceMetrics``' plain-list collector."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from app.metrics import REQUEST_BUCKETS, UNMATCHED_ROUTE, ServiceMetrics

ROUTE = "/episodes/{episode_id}"
DURATIONS = [0.0004, 0.001, 0.0011, 0.003, 0.05, 0.05, 2.0, 11.0]  # on, between and past the bounds


def _reference() -> CollectorRegistry:
    registry = CollectorRegistry()
    names = ["method", "route", "status"]
    counter = Counter("memory_http_requests", "", names, registry=registry)
    histogram = Histogram("memory_http_request_duration_seconds", "", names, buckets=REQUEST_BUCKETS, registry=registry)
    for seconds in DURATIONS:
        counter.labels("GET", ROUTE, "200").inc()
        histogram.labels("GET", ROUTE, "200").observe(seconds)
    counter.labels("POST", UNMATCHED_ROUTE, "404").inc()
    histogram.labels("POST", UNMATCHED_ROUTE, "404").observe(0.002)
    return registry


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in registry.collect() for s in family.samples if not s.name.endswith("_created")}


def _created_series(registry: CollectorRegistry) -> set[tuple[str, tuple]]:
    return {(s.name, tuple(sorted(s.labels.items())))
            for family in registry.collect() for s in family.samples if s.name.endswith("_created")}


def test_the_series_match_prometheus_clients_own():
    metrics = ServiceMetrics()
    for seconds in DURATIONS:
        metrics.observe_request("GET", ROUTE, 200, seconds)
    metrics.observe_request("POST", "", 404, 0.002)  # no route: one label for every unknown path
    ours = {key: value for key, value in _samples(metrics.registry).items()
            if key[0].startswith("memory_http_request") and "in_flight" not in key[0]}
    assert ours == _samples(_reference())
    ours_created = {key for key in _created_series(metrics.registry) if key[0].startswith("memory_http_request")}
    assert ours_created == _created_series(_reference())


def test_a_client_that_hung_up_is_not_a_request_counted():
    metrics = ServiceMetrics()
    metrics.observe_request("GET", ROUTE, 499, 0.01)
    assert metrics.registry.get_sample_value("memory_http_requests_total",
                                             {"method": "GET", "route": ROUTE, "status": "499"}) is None
    assert metrics.registry.get_sample_value("memory_http_client_disconnects_total",
                                             {"method": "GET", "route": ROUTE}) == 1
