"""Metadata filters: the one definition every entry point and every adapter agrees on.

A client sends ``{"metadata": {key: condition, ...}}``; every key must hold (AND). A condition is

- a scalar (string, number, boolean): the value at ``key`` equals it, of the same JSON type
  (``true`` never equals ``1``, ``"1"`` never equals ``1``);
- ``{"in": [scalar, ...]}``: equals one of them;
- ``{"gte": x, "gt": x, "lte": y, "lt": y}`` (any of them): a number compared with numbers, a string
  with strings (code point order, so ISO 8601 timestamps in one format compare as times);
- ``{"exists": true | false}``: the key is present (with any value, ``null`` too) or absent.

Operators in one object combine with AND. Keys are top-level metadata keys, taken literally (a dot
is part of the key, not a path). A record whose value has another type than the condition does not
match; a missing key matches only ``{"exists": false}``.

``parse_filter`` turns the wire form into ``MetadataFilter`` or raises ``Invalid`` naming the
problem; ``MetadataFilter.matches`` is the reference semantics, which the SQLite translation and the
vector-index payload filters must reproduce exactly (the contract tests compare them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.errors import Invalid

MAX_FILTER_KEYS = 32
MAX_IN_VALUES = 256
MAX_KEY_LENGTH = 256
MAX_STRING_LENGTH = 4096
RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
OPERATORS = ("in", "exists", *RANGE_OPERATORS)

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Condition:
    """One key's condition; ``None`` fields do not apply."""

    key: str
    equals: tuple[Scalar, ...] | None = None  # one value for a scalar condition, several for ``in``
    gt: int | float | str | None = None
    gte: int | float | str | None = None
    lt: int | float | str | None = None
    lte: int | float | str | None = None
    exists: bool | None = None

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        present = self.key in metadata
        if self.exists is not None and present != self.exists:
            return False
        if self.equals is None and all(b is None for b in (self.gt, self.gte, self.lt, self.lte)):
            return True  # an ``exists`` condition alone
        if not present:
            return False
        value = metadata[self.key]
        if self.equals is not None and not any(same_json_value(value, wanted) for wanted in self.equals):
            return False
        for bound, holds in ((self.gt, lambda v, b: v > b), (self.gte, lambda v, b: v >= b),
                             (self.lt, lambda v, b: v < b), (self.lte, lambda v, b: v <= b)):
            if bound is not None and not (comparable(value, bound) and holds(value, bound)):
                return False
        return True


@dataclass(frozen=True)
class MetadataFilter:
    conditions: tuple[Condition, ...] = ()

    def matches(self, metadata: Mapping[str, Any] | None) -> bool:
        return all(c.matches(metadata or {}) for c in self.conditions)

    def __bool__(self) -> bool:
        return bool(self.conditions)


def json_type(value: Any) -> str | None:
    """The JSON type name of a decoded value, as SQLite's ``json_type`` spells it for scalars."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "real"
    if isinstance(value, str):
        return "text"
    return None  # arrays and objects never equal or compare with a scalar


def _kind(value: Any) -> str | None:
    kind = json_type(value)
    return {"integer": "number", "real": "number", "true": "bool", "false": "bool"}.get(kind or "", kind)


def same_json_value(value: Any, wanted: Scalar) -> bool:
    return _kind(value) == _kind(wanted) and value == wanted


def comparable(value: Any, bound: int | float | str) -> bool:
    kind = _kind(value)
    return kind in ("number", "text") and kind == _kind(bound)


def _scalar(value: Any, field: str) -> Scalar:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise Invalid(f"{field} is outside the 64-bit integer range", field=field)
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise Invalid(f"{field} must be a finite number", field=field)
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING_LENGTH:
            raise Invalid(f"{field} is longer than {MAX_STRING_LENGTH} characters", field=field)
        if "\x00" in value:
            raise Invalid(f"{field} must not contain NUL characters", field=field)
        return value
    raise Invalid(f"{field} must be a string, number or boolean (use {{\"exists\": false}} for a missing key)",
                  field=field)


def _bound(value: Any, field: str) -> int | float | str:
    scalar = _scalar(value, field)
    if isinstance(scalar, bool):
        raise Invalid(f"{field} must be a number or a string", field=field)
    return scalar


def _condition(key: str, spec: Any, field: str) -> Condition:
    if not isinstance(spec, Mapping):
        return Condition(key, equals=(_scalar(spec, field),))
    if not spec:
        raise Invalid(f"{field} must name at least one of {', '.join(OPERATORS)}", field=field)
    unknown = sorted(set(spec) - set(OPERATORS))
    if unknown:
        raise Invalid(f"{field} has unknown operator(s) {', '.join(map(repr, unknown))}; "
                      f"use {', '.join(OPERATORS)}", field=field)
    equals = None
    if "in" in spec:
        values = spec["in"]
        if not isinstance(values, list) or not values:
            raise Invalid(f"{field}.in must be a non-empty list", field=f"{field}.in")
        if len(values) > MAX_IN_VALUES:
            raise Invalid(f"{field}.in has more than {MAX_IN_VALUES} values", field=f"{field}.in")
        equals = tuple(_scalar(v, f"{field}.in") for v in values)
    exists = spec.get("exists")
    if "exists" in spec and not isinstance(exists, bool):
        raise Invalid(f"{field}.exists must be true or false", field=f"{field}.exists")
    bounds = {op: _bound(spec[op], f"{field}.{op}") for op in RANGE_OPERATORS if op in spec}
    if len({_kind(b) for b in bounds.values()}) > 1:
        raise Invalid(f"{field} compares with a number and a string at once", field=field)
    if exists is False and (equals is not None or bounds):
        raise Invalid(f"{field}: exists false cannot be combined with other operators", field=field)
    return Condition(key, equals=equals, exists=exists, **bounds)


def parse_filter(raw: Any, field: str = "filter") -> MetadataFilter:
    """The wire ``filter`` object (``None``: no filter) as a ``MetadataFilter``; ``Invalid`` names
    the offending part (``filter.metadata.<key>``)."""
    if raw is None:
        return MetadataFilter()
    if not isinstance(raw, Mapping):
        raise Invalid(f"{field} must be an object like {{\"metadata\": {{...}}}}", field=field)
    unknown = sorted(set(raw) - {"metadata"})
    if unknown:
        raise Invalid(f"{field} has unknown field(s) {', '.join(map(repr, unknown))}; only 'metadata' is supported",
                      field=field)
    metadata = raw.get("metadata")
    if metadata is None:
        return MetadataFilter()
    if not isinstance(metadata, Mapping):
        raise Invalid(f"{field}.metadata must be an object of key: condition", field=f"{field}.metadata")
    if len(metadata) > MAX_FILTER_KEYS:
        raise Invalid(f"{field}.metadata has more than {MAX_FILTER_KEYS} keys", field=f"{field}.metadata")
    conditions = []
    for key, spec in metadata.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH or "\x00" in key:
            raise Invalid(f"{field}.metadata keys must be 1 to {MAX_KEY_LENGTH} characters without NUL",
                          field=f"{field}.metadata")
        conditions.append(_condition(key, spec, f"{field}.metadata.{key}"))
    return MetadataFilter(tuple(conditions))
