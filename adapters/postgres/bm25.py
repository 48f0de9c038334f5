"""The ranking of a keyword search: Okapi BM25 computed in SQL over the matching rows.

The same function (k1 1.2, b 0.75, IDF floored at 1e-6) SQLite's FTS5 ranks with, so a store moved
between the two ranks its keyword results alike. Its inputs: each positive lexeme of the tsquery
(a prefix one matches the lexemes it begins), how many records hold it (the GIN index counts
them), each record's token count (``tsv_len``) against the table's mean, and how often each lexeme
occurs in the record (its positions in ``tsv``). A phrase is scored as its words.

The collection statistics — the table's size, its mean length and each lexeme's document count —
and the match counts the keyword budget plans with (``domain.keywords.within_budget``) cost a scan
of the table and one count per term, which at 100k records took longer than the
ranking itself. ``Statistics`` keeps them per process: exact while a table is small (tests and
one assistant's first weeks see exact BM25), and past that reused until they are ``MAX_AGE``
seconds old or the table's highest id has grown by a tenth. Stale statistics only shift scores
slightly; the IDF stays defined because a lexeme is never counted in more records than the table.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import psycopg

from adapters.postgres.rows import columns
from adapters.postgres.schema import TEXT_CONFIG

K1, B = 1.2, 0.75
EXACT_BELOW = 5_000
"""Tables whose highest id is below this have their statistics read at every search."""
MAX_AGE = 30.0
MAX_TERMS_KEPT = 20_000

_TERMS = """SELECT m[2], m[3] IS NOT NULL
FROM regexp_matches(to_tsquery('{config}', %s)::text, '(!?)''([^'']*)''(:\\*)?', 'g') AS m WHERE m[1] = ''"""

# A record's lexemes that the query names: with exact terms only, the C functions pick them out
# (weight A set on the query's lexemes, then only those kept: the stored vectors carry no
# weights), a few times faster than joining every lexeme of every matching record; a prefix
# term needs the join.
_EXACT = ("unnest(ts_filter(setweight(t.tsv, 'A', %s::text[]), '{a}')) AS u", "u.lexeme = df.lexeme")
_PREFIX = ("unnest(t.tsv) AS u", "CASE WHEN df.prefix THEN starts_with(u.lexeme, df.lexeme) ELSE u.lexeme = df.lexeme END")

_RANKED = """
WITH df AS MATERIALIZED (SELECT * FROM unnest(%s::text[], %s::bool[], %s::float8[]) AS d(lexeme, prefix, idf))
SELECT {columns}, (
    SELECT coalesce(sum(tf.idf * tf.f * {k1_1} / (tf.f + {k1} * ({one_b} + {b} * t.tsv_len / %s::float8))), 0)
    FROM (SELECT df.idf, sum(coalesce(array_length(u.positions, 1), 1))::float8 AS f
          FROM {lexemes} JOIN df ON {joined}
          GROUP BY df.lexeme, df.prefix, df.idf) AS tf
) AS rank_score
FROM {table} t
WHERE t.tsv @@ to_tsquery('{config}', %s) AND {where}
ORDER BY rank_score DESC, t.id LIMIT %s"""


@dataclass
class _TableStats:
    highest_id: int
    read_at: float
    size: float
    mean_length: float
    counts: dict[tuple[str, bool], float] = field(default_factory=dict)
    matches: dict[tuple[str, int], int] = field(default_factory=dict)


class Statistics:
    """The collection statistics BM25 needs, per table, reused as the module docstring says."""

    def __init__(self) -> None:
        self._tables: dict[str, _TableStats] = {}

    def _table(self, conn: psycopg.Connection, table: str, highest_id: int) -> _TableStats:
        kept = self._tables.get(table)
        if (kept is not None and highest_id >= EXACT_BELOW and time.monotonic() - kept.read_at < MAX_AGE
                and highest_id <= kept.highest_id * 1.1):
            return kept
        size, mean = conn.execute(
            f"SELECT count(*)::float8, coalesce(avg(tsv_len), 0)::float8 FROM {table}").fetchone()
        kept = self._tables[table] = _TableStats(highest_id, time.monotonic(), size, mean)
        return kept

    def matches(self, conn: psycopg.Connection, table: str, highest_id: int, tsquery: str, most: int) -> int:
        """How many records match ``tsquery``, counted up to ``most`` (the keyword budget's plan)."""
        stats = self._table(conn, table, highest_id)
        if len(stats.matches) > MAX_TERMS_KEPT:
            stats.matches.clear()
        found = stats.matches.get((tsquery, most))
        if found is None:
            found = stats.matches[(tsquery, most)] = conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE tsv @@ to_tsquery('{TEXT_CONFIG}', %s) LIMIT %s) AS m",
                (tsquery, most)).fetchone()[0]
        return found

    def idf(self, conn: psycopg.Connection, table: str, highest_id: int,
            terms: list[tuple[str, bool]]) -> tuple[list[float], float]:
        """Each term's IDF and the table's mean record length."""
        stats = self._table(conn, table, highest_id)
        if len(stats.counts) > MAX_TERMS_KEPT:
            stats.counts.clear()
        idfs = []
        for lexeme, prefix in terms:
            found = stats.counts.get((lexeme, prefix))
            if found is None:
                pattern = "'" + lexeme.replace("'", "''") + "'" + (":*" if prefix else "")
                found = stats.counts[(lexeme, prefix)] = conn.execute(
                    f"SELECT count(*)::float8 FROM {table} WHERE tsv @@ to_tsquery('simple', %s)",
                    (pattern,)).fetchone()[0]
            size = max(stats.size, found)
            idfs.append(max(math.log((size - found + 0.5) / (found + 0.5)), 1e-6))
        return idfs, stats.mean_length


def ranked(conn: psycopg.Connection, statistics: Statistics, table: str, tsquery: str, highest_id: int,
           where: str, params: list, limit: int) -> list:
    """``table``'s rows (alias ``t``) that match ``tsquery`` and ``where`` (with ``params``), best
    first by BM25 (``rank_score``), ties by id, at most ``limit``."""
    terms = [(lexeme, bool(prefix)) for lexeme, prefix in conn.execute(
        _TERMS.format(config=TEXT_CONFIG), (tsquery,)).fetchall()]
    idfs, mean_length = statistics.idf(conn, table, highest_id, terms)
    lexemes = [lexeme for lexeme, _ in terms]
    exact = not any(prefix for _, prefix in terms)
    source, joined = _EXACT if exact else _PREFIX
    sql = _RANKED.format(config=TEXT_CONFIG, table=table, columns=columns(table, "t."), where=where,
                         k1=K1, k1_1=K1 + 1, b=B, one_b=1 - B, lexemes=source, joined=joined)
    return conn.execute(sql, [lexemes, [prefix for _, prefix in terms], idfs, max(mean_length, 1.0),
                              *([lexemes] if exact else []), tsquery, *params, limit]).fetchall()
