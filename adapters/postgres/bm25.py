"""The ranking of a keyword search: Okapi BM25 computed in SQL over the matching rows.

The same function (k1 1.2, b 0.75, IDF floored at 1e-6) SQLite's FTS5 ranks with, so a store moved
between the two ranks its keyword results alike. Its inputs: each positive lexeme of the tsquery
(a prefix one matches the lexemes it begins), how many records hold it (the GIN index counts
them), each record's token count (``tsv_len``) against the table's mean, and how often each lexeme
occurs in the record (its positions in ``tsv``). A phrase is scored as its words.

The table's size and mean length are read at each search: a scan of the table's ``tsv_len``
column, cheap at the sizes one assistant's memory reaches, linear beyond.
"""

from __future__ import annotations

from collections.abc import Callable

from adapters.postgres.rows import columns
from adapters.postgres.schema import TEXT_CONFIG

K1, B = 1.2, 0.75

_TEMPLATE = """
WITH q AS MATERIALIZED (SELECT to_tsquery('{config}', %s) AS q),
terms AS MATERIALIZED (SELECT m[2] AS lexeme, m[3] IS NOT NULL AS prefix
          FROM q, regexp_matches(q.q::text, '(!?)''([^'']*)''(:\\*)?', 'g') AS m WHERE m[1] = ''),
stats AS MATERIALIZED (SELECT count(*)::float8 AS n, coalesce(avg(tsv_len), 0)::float8 AS avgdl FROM {table}),
df AS MATERIALIZED (SELECT terms.lexeme, terms.prefix, greatest(ln((stats.n - found.n + 0.5) / (found.n + 0.5)), 1e-6) AS idf
       FROM terms, stats, LATERAL (SELECT count(*)::float8 AS n FROM {table} x WHERE x.tsv @@ to_tsquery('simple',
           quote_literal(terms.lexeme) || CASE WHEN terms.prefix THEN ':*' ELSE '' END)) AS found)
SELECT {columns}, (
    SELECT coalesce(sum(tf.idf * tf.f * {k1_1} / (tf.f + {k1} * ({one_b} + {b} * t.tsv_len / greatest(stats.avgdl, 1)))), 0)
    FROM (SELECT df.idf, sum(coalesce(array_length(u.positions, 1), 1))::float8 AS f
          FROM unnest(t.tsv) AS u
          JOIN df ON CASE WHEN df.prefix THEN starts_with(u.lexeme, df.lexeme) ELSE u.lexeme = df.lexeme END
          GROUP BY df.lexeme, df.prefix, df.idf) AS tf
) AS rank_score
FROM {table} t, q, stats
WHERE t.tsv @@ q.q AND {where}
ORDER BY rank_score DESC, t.id LIMIT %s"""


def ranked_sql(table: str, where: str) -> tuple[str, Callable[[str], list]]:
    """The statement ranking ``table``'s rows that match a tsquery and ``where`` (on alias ``t``),
    best first, ties by id; its parameters are ``head(tsquery text)``, then ``where``'s, then the limit."""
    sql = _TEMPLATE.format(config=TEXT_CONFIG, table=table, columns=columns(table, "t."), where=where,
                           k1=K1, k1_1=K1 + 1, b=B, one_b=1 - B)
    return sql, lambda text: [text]
