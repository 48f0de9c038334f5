"""``MetadataFilter`` as SQL over a ``jsonb`` metadata column.

Top-level keys are looked up with ``->`` as plain strings (any character, a dot or a quote
included); ``jsonb_typeof`` keeps JSON types apart exactly as ``domain.filters`` does (``true`` is
not ``1``, ``"1"`` is not ``1``).
"""

from __future__ import annotations

from domain.filters import Condition, MetadataFilter


def _equals(value, at: str) -> tuple[str, list]:
    if isinstance(value, bool):
        return f"({at} = %s::jsonb)", ["true" if value else "false"]
    if isinstance(value, (int, float)):
        return f"(jsonb_typeof({at}) = 'number' AND ({at})::text::numeric = %s::numeric)", [value]
    return f"(jsonb_typeof({at}) = 'string' AND {at} #>> '{{}}' = %s)", [value]


def _condition(condition: Condition, column: str) -> tuple[str, list]:
    if condition.exists is False:
        return f"NOT jsonb_exists({column}, %s)", [condition.key]
    at = f"({column} -> %s)"  # the key's value (one parameter each time it is written)
    parts, params = [f"jsonb_exists({column}, %s)"], [condition.key]
    if condition.equals is not None:
        alternatives = [_equals(v, at) for v in condition.equals]
        parts.append("(" + " OR ".join(sql for sql, _ in alternatives) + ")")
        for sql, values in alternatives:  # the key for each ``at`` written, then the value
            params.extend([condition.key] * sql.count(at))
            params.extend(values)
    for op, bound in (("<", condition.lt), ("<=", condition.lte), (">", condition.gt), (">=", condition.gte)):
        if bound is not None:
            if isinstance(bound, str):
                parts.append(f"(jsonb_typeof({at}) = 'string' AND ({at} #>> '{{}}') COLLATE \"C\" {op} %s)")
            else:
                parts.append(f"(jsonb_typeof({at}) = 'number' AND ({at})::text::numeric {op} %s::numeric)")
            params.extend([condition.key, condition.key, bound])
    return "(" + " AND ".join(parts) + ")", params


def metadata_sql(flt: MetadataFilter | None, column: str = "metadata") -> tuple[str, list]:
    """``(sql, params)`` true for the rows whose ``column`` matches ``flt``; ``("TRUE", [])`` for no filter.

    ``column`` is a trusted identifier (``metadata``, ``t.metadata``), never client input."""
    if not flt:
        return "TRUE", []
    clauses, params = [], []
    for condition in flt.conditions:
        sql, values = _condition(condition, column)
        clauses.append(sql)
        params.extend(values)
    return " AND ".join(clauses), params
