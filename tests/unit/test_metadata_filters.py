"""The metadata filter: parsing errors name the part, and SQLite agrees with the reference matcher."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.sqlite.driver import sqlite3
from adapters.sqlite.filters import metadata_sql
from domain.errors import Invalid
from domain.filters import MetadataFilter, parse_filter

KEYS = ["a", "b.c", 'q"uote', "ünï"]
scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.sampled_from([0.5, -1.0, 2.0]),
                    st.sampled_from(["", "x", "y", "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z", "1"]))
values = st.one_of(scalars, st.none(), st.just([1, 2]), st.just({"n": 1}))
metadatas = st.dictionaries(st.sampled_from(KEYS), values, max_size=4)
conditions = st.one_of(
    scalars,
    st.fixed_dictionaries({"in": st.lists(scalars, min_size=1, max_size=3)}),
    st.fixed_dictionaries({"exists": st.booleans()}),
    st.fixed_dictionaries({}, optional={"gte": st.integers(-5, 5), "lt": st.integers(-5, 5)}).filter(bool),
    st.fixed_dictionaries({}, optional={"gt": st.sampled_from(["", "2026-03-01", "x"]),
                                        "lte": st.sampled_from(["y", "2026-12-31"])}).filter(bool),
    st.fixed_dictionaries({"exists": st.just(True), "in": st.lists(scalars, min_size=1, max_size=2)}),
)
filters = st.dictionaries(st.sampled_from(KEYS), conditions, min_size=1, max_size=3)


def _sqlite_matches(flt: MetadataFilter, rows: list[dict]) -> list[int]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, metadata TEXT NOT NULL)")
    db.executemany("INSERT INTO t (id, metadata) VALUES (?, ?)", [(i, json.dumps(m)) for i, m in enumerate(rows)])
    where, params = metadata_sql(flt)
    return [r[0] for r in db.execute(f"SELECT id FROM t WHERE {where} ORDER BY id", params)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=filters, rows=st.lists(metadatas, min_size=1, max_size=8))
def test_sqlite_selects_exactly_the_rows_the_reference_matcher_accepts(raw, rows):
    try:
        flt = parse_filter({"metadata": raw})
    except Invalid:
        return  # e.g. a number and a string bound at once: refused, never half-applied
    expected = [i for i, m in enumerate(rows) if flt.matches(m)]
    assert _sqlite_matches(flt, rows) == expected


def test_types_are_kept_apart():
    rows = [{"a": True}, {"a": 1}, {"a": "1"}, {"a": 1.0}, {"a": None}, {}]
    assert _sqlite_matches(parse_filter({"metadata": {"a": 1}}), rows) == [1, 3]
    assert _sqlite_matches(parse_filter({"metadata": {"a": True}}), rows) == [0]
    assert _sqlite_matches(parse_filter({"metadata": {"a": "1"}}), rows) == [2]
    assert _sqlite_matches(parse_filter({"metadata": {"a": {"exists": True}}}), rows) == [0, 1, 2, 3, 4]
    assert _sqlite_matches(parse_filter({"metadata": {"a": {"exists": False}}}), rows) == [5]


def test_no_filter_matches_everything():
    assert not parse_filter(None)
    assert not parse_filter({"metadata": {}})
    assert metadata_sql(parse_filter(None)) == ("1", [])


@pytest.mark.parametrize(("raw", "field"), [
    ([], "filter"),
    ({"metadata": {"a": 1}, "tags": []}, "filter"),
    ({"metadata": []}, "filter.metadata"),
    ({"metadata": {"a": None}}, "filter.metadata.a"),
    ({"metadata": {"a": [1]}}, "filter.metadata.a"),
    ({"metadata": {"a": {}}}, "filter.metadata.a"),
    ({"metadata": {"a": {"eq": 1}}}, "filter.metadata.a"),
    ({"metadata": {"a": {"in": []}}}, "filter.metadata.a.in"),
    ({"metadata": {"a": {"in": 3}}}, "filter.metadata.a.in"),
    ({"metadata": {"a": {"in": [{"x": 1}]}}}, "filter.metadata.a.in"),
    ({"metadata": {"a": {"exists": "yes"}}}, "filter.metadata.a.exists"),
    ({"metadata": {"a": {"gte": True}}}, "filter.metadata.a.gte"),
    ({"metadata": {"a": {"gte": 1, "lte": "z"}}}, "filter.metadata.a"),
    ({"metadata": {"a": {"exists": False, "in": [1]}}}, "filter.metadata.a"),
    ({"metadata": {"a": float("nan")}}, "filter.metadata.a"),
    ({"metadata": {"a": 2**70}}, "filter.metadata.a"),
    ({"metadata": {"a": "x\x00"}}, "filter.metadata.a"),
    ({"metadata": {"": 1}}, "filter.metadata"),
    ({"metadata": {f"k{i}": 1 for i in range(40)}}, "filter.metadata"),
])
def test_a_bad_filter_is_refused_naming_the_part(raw, field):
    with pytest.raises(Invalid) as caught:
        parse_filter(raw)
    assert caught.value.field == field
