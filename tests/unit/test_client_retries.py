"""The client's retry rules (nexusai_memory_client.retries): what is worth another attempt, and when."""

from __future__ import annotations

import httpx
import pytest

from nexusai_memory_client.retries import Retries, key_for

POLICY = Retries(attempts=3, backoff=0.1, max_delay=5.0)


def _answer(status: int, retry_after: str | None = None, code: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(status, headers=headers, json={"code": code} if code else {})


@pytest.mark.parametrize(("answer", "wait"), [
    (_answer(503, "2"), 2.0), (_answer(409, "1", "idempotency_key_in_flight"), 1.0), (_answer(429, "0"), 0.0),
])
def test_a_refusal_that_says_when_is_retried_after_that_long(answer, wait):
    assert POLICY.after_response(1, answer, safe=True) == wait


def test_a_429_without_retry_after_backs_off_within_the_bounds():
    assert 0.05 <= POLICY.after_response(1, _answer(429), safe=True) <= 0.1
    assert 0.1 <= POLICY.after_response(2, _answer(429), safe=True) <= 0.2


@pytest.mark.parametrize("answer", [
    _answer(200), _answer(201), _answer(400), _answer(404), _answer(422), _answer(500), _answer(503),
    _answer(409, "1", "conflict"), _answer(503, "60"),
])
def test_an_answer_is_final_unless_it_is_a_transient_refusal_worth_waiting_for(answer):
    assert POLICY.after_response(1, answer, safe=True) is None


def test_the_last_attempt_and_an_unsafe_call_are_never_retried():
    assert POLICY.after_response(3, _answer(429), safe=True) is None
    assert POLICY.after_response(1, _answer(429), safe=False) is None
    assert POLICY.after_error(3, httpx.ConnectError("refused"), safe=True) is None


def test_a_lost_answer_is_retried_only_when_the_call_is_safe_to_repeat():
    lost = httpx.ReadError("reset")
    assert POLICY.after_error(1, lost, safe=True) is not None
    assert POLICY.after_error(1, lost, safe=False) is None
    assert POLICY.after_error(1, httpx.ConnectError("refused"), safe=False) is not None  # it never left


def test_writes_get_a_fresh_key_and_reads_none():
    first, second = key_for("POST", False, None, True), key_for("POST", False, None, True)
    assert first and second and first != second
    assert key_for("GET", False, None, True) is None
    assert key_for("POST", True, None, True) is None  # a search: a POST that only reads
    assert key_for("DELETE", False, None, False) is None
    assert key_for("PATCH", False, "mine", False) == "mine"


def test_a_policy_must_allow_one_attempt_at_least():
    with pytest.raises(ValueError):
        Retries(attempts=0)
