"""``MetadataFilter`` as SQL over a JSON metadata column.

Each condition is an ``EXISTS`` over ``json_each(<column>)``: top-level keys are matched as plain
strings (any character, a dot or a quote included, without JSON-path quoting rules), and the
``type`` column keeps JSON types apart exactly as ``domain.filters`` does (``true`` is not ``1``).
"""

from __future__ import annotations

from domain.filters import Condition, MetadataFilter

_NUMBER = "type IN ('integer', 'real')"


def _equals(value) -> tuple[str, list]:
    if isinstance(value, bool):
        return ("type = 'true'" if value else "type = 'false'"), []
    if isinstance(value, (int, float)):
        return f"({_NUMBER} AND value = ?)", [value]
    return "(type = 'text' AND value = ?)", [value]


def _condition(condition: Condition, column: str) -> tuple[str, list]:
    params: list = [condition.key]
    if condition.exists is False:
        return f"NOT EXISTS (SELECT 1 FROM json_each({column}) WHERE key = ?)", params
    parts: list[str] = []
    if condition.equals is not None:
        alternatives = [_equals(v) for v in condition.equals]
        parts.append("(" + " OR ".join(sql for sql, _ in alternatives) + ")")
        for _, values in alternatives:
            params.extend(values)
    for op, bound in (("<", condition.lt), ("<=", condition.lte), (">", condition.gt), (">=", condition.gte)):
        if bound is not None:
            kind = "type = 'text'" if isinstance(bound, str) else _NUMBER
            parts.append(f"({kind} AND value {op} ?)")
            params.append(bound)
    where = " AND ".join(["key = ?", *parts])
    return f"EXISTS (SELECT 1 FROM json_each({column}) WHERE {where})", params


def metadata_sql(flt: MetadataFilter | None, column: str = "metadata") -> tuple[str, list]:
    """``(sql, params)`` true for the rows whose ``column`` matches ``flt``; ``("1", [])`` for no filter.

    ``column`` is a trusted identifier (``metadata``, ``e.metadata``), never client input."""
    if not flt:
        return "1", []
    clauses, params = [], []
    for condition in flt.conditions:
        sql, values = _condition(condition, column)
        clauses.append(sql)
        params.extend(values)
    return " AND ".join(clauses), params
