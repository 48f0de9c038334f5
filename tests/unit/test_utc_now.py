"""``utc_now`` (made once per millisecond from ``time``) reads as ``format_timestamp(datetime.now(UTC))``."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from domain.models import format_timestamp, parse_timestamp, utc_now


def test_utc_now_lies_between_two_readings_of_the_datetime_form() -> None:
    for _ in range(20_000):  # many milliseconds: made afresh and reused alike
        before = format_timestamp(datetime.now(UTC))
        now = utc_now()
        after = format_timestamp(datetime.now(UTC))
        assert before <= now <= after


def test_utc_now_is_in_the_store_format_and_parses_back() -> None:
    now = utc_now()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now)
    assert format_timestamp(parse_timestamp(now)) == now
