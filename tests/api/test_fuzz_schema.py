"""Schema-driven fuzzing: schemathesis generates requests for every route from the app's own
OpenAPI schema and checks each answer: never a 5xx, and status, content type and body as the
schema documents them.

It runs against a real ``memory-service serve`` process (SQLite file, embedded Qdrant Edge,
the hash embedder), so the whole stack is fuzzed, not a test double. ``FUZZ_EXAMPLES`` bounds
the generated cases per route (default keeps the run well under a minute).
"""

from __future__ import annotations

import os

import hypothesis
import hypothesis.errors
import pytest
import requests
import schemathesis
from schemathesis import GenerationMode

from tests.support.server import ServiceProcess, service_env

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
_PHASES = (hypothesis.Phase.explicit, hypothesis.Phase.generate)  # shrinking unbounded cases costs minutes
CALLS: dict[str, int] = {}
CONFIG = schemathesis.Config.from_dict({"checks": {
    # A schema-valid request may still be refused for what a schema cannot say (FTS syntax, an
    # unknown ranker name, both messages empty); those are clear 400s, not bugs.
    "positive_data_acceptance": {"enabled": False},
    # 413: a generated body over MAX_BODY_BYTES is refused before it is parsed.
    "negative_data_rejection": {"expected-statuses": [400, 404, 405, 413, 415]},
}})


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fuzz")
    with ServiceProcess(service_env(directory / "memory.db"), log_dir=directory) as server:
        # A few rows, so ids 1 and 2 exist and generated ids sometimes hit real records.
        with requests.Session() as http:
            session = http.post(f"{server.url}/sessions", json={"externalId": "seed"}).json()
            for n in range(2):
                http.post(f"{server.url}/episodes", json={"sessionId": session["id"], "userMessage": f"hello {n}",
                                                        "aiResponse": "world"})
                http.post(f"{server.url}/entities", json={"name": f"seed {n}", "type": "person"})
        yield server
        stderr = server.stderr()
    assert "Traceback" not in stderr, stderr[-3000:]


@pytest.fixture(scope="module")
def api_schema(service):
    return schemathesis.openapi.from_url(f"{service.url}/schema/openapi.json", config=CONFIG)


@pytest.fixture(scope="module")
def http():
    with requests.Session() as session:
        yield session


def _operations(api_schema):
    return sorted((result.ok() for result in api_schema.get_all_operations()), key=lambda op: op.label)


def _fuzz_test(operation, mode: GenerationMode, http: requests.Session):
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck), phases=_PHASES)
    def fuzz(case) -> None:
        CALLS[operation.label] = CALLS.get(operation.label, 0) + 1
        _short_long_polls(case)
        case.call_and_validate(session=http)

    return fuzz


def _short_long_polls(case) -> None:
    """GET /events may wait up to 30 s for an event that never comes (a generated ``after`` past
    the end): a valid ``wait`` is cut to 50 ms so the run stays short; every other input is fuzzed as generated."""
    wait = (case.query or {}).get("wait")
    if case.path == "/events" and isinstance(wait, (int, float)) and not isinstance(wait, bool) and 0 < wait <= 30:
        case.query["wait"] = min(wait, 0.05)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_route_answers_5xx_or_off_schema(api_schema, http, mode):
    # schemathesis's lazy pytest fixture loader breaks on pytest 9 (it reads Function._nodeid),
    # so each operation gets its own hypothesis test built from the operation's strategy.
    operations = _operations(api_schema)
    assert len(operations) >= 25, [op.label for op in operations]
    for operation in operations:
        fuzz = _fuzz_test(operation, mode, http)
        try:
            fuzz()
        except hypothesis.errors.Unsatisfiable:
            # No invalid request exists for a route without inputs (GET /health) or with only a
            # free-form string; the positive run covers those.
            assert mode is GenerationMode.NEGATIVE, operation.label
    if mode is GenerationMode.POSITIVE:  # guards against a route silently generating nothing
        assert {op.label for op in operations} <= set(CALLS)
    print(f"\nschemathesis ({mode.value}): {sum(CALLS.values())} requests so far over {len(CALLS)} operations")




def test_a_schema_valid_request_with_an_undeclared_query_parameter_is_a_400_naming_it(api_schema, http):
    # A class schemathesis does not generate (OpenAPI cannot forbid extra query parameters): each
    # operation's generated valid requests, plus one parameter the route does not take.
    refused: dict[str, int] = {}
    for operation in _operations(api_schema):
        @hypothesis.given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        @hypothesis.settings(max_examples=3, deadline=None, derandomize=True, database=None,
                             suppress_health_check=list(hypothesis.HealthCheck), phases=_PHASES)
        def extra(case) -> None:
            case.query = {**(case.query or {}), "zzUndeclared": "1"}
            response = case.call(session=http)
            if response.status_code in (404, 413, 415):  # an unknown record or path id, a body refused first
                return
            assert response.status_code == 400, (operation.label, response.status_code, response.text[:300])
            assert response.json()["field"] == "zzUndeclared", (operation.label, response.text[:300])
            refused[operation.label] = refused.get(operation.label, 0) + 1

        extra()
    assert len(refused) >= 25, sorted(refused)
