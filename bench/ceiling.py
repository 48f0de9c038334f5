"""The ceilings: what SQLite and Qdrant Edge do in-process, with no HTTP, asyncio or framework.

Every ceiling runs the same SQL (or engine call) the service runs, on a copy of the same store,
single-threaded, so ``server req/s / ceiling ops/s`` says how much of the engine's speed the
service keeps. Loops are bounded by both a count and a time.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import qdrant_edge as qe  # noqa: E402

from adapters.embedders.hashing import hash_vector  # noqa: E402
from adapters.sqlite import rows  # noqa: E402
from adapters.sqlite.database import _configure  # noqa: E402  (the service's exact PRAGMAs)
from adapters.sqlite.driver import sqlite3  # noqa: E402
from adapters.sqlite.keyword_index import CountMemo, _plan  # noqa: E402  (the service's keyword budget)
from domain.keywords import plain_query, recall_query  # noqa: E402
from domain.models import utc_now  # noqa: E402

import load  # noqa: E402  (bench/, beside this file)

MAX_OPS = 200_000


def _timed(op: Callable[[int], object], seconds: float, max_ops: int = MAX_OPS) -> dict:
    """Run ``op(i)`` until ``seconds`` or ``max_ops``; throughput and per-op latency."""
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds
    i = 0
    while i < max_ops:
        t0 = time.perf_counter()
        op(i)
        t1 = time.perf_counter()
        latencies.append(t1 - t0)
        i += 1
        if t1 >= deadline:
            break
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "ops": i, "ops_per_s": round(i / elapsed, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1e3, 3),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3, 3),
        "mean_ms": round(statistics.fmean(latencies) * 1e3, 3),
    }


def _connect(db_path: Path, *, writer: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    _configure(conn, writer=writer)
    return conn


def raw_insert(db_path: Path, sessions: int, texts: list[tuple[str, str]], seconds: float) -> dict:
    """One episode per transaction (BEGIN IMMEDIATE ... COMMIT), FTS trigger firing, WAL."""
    conn = _connect(db_path, writer=True)
    rng = random.Random(7)
    sql = ("INSERT INTO episodes(session_id, user_message, ai_response, token_count, metadata, created_at)"
           " VALUES (?,?,?,?,?,?)")

    def op(i: int) -> None:
        user, ai = texts[i % len(texts)]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql, (rng.randint(1, sessions), user, ai, len(user) // 4, "{}", utc_now()))
        conn.execute("COMMIT")

    result = _timed(op, seconds)
    conn.close()
    return result


def raw_insert_with_outbox(db_path: Path, sessions: int, texts: list[tuple[str, str]], seconds: float) -> dict:
    """The same, plus the outbox row the service writes with every episode (its true unit of work)."""
    conn = _connect(db_path, writer=True)
    rng = random.Random(8)
    sql = ("INSERT INTO episodes(session_id, user_message, ai_response, token_count, metadata, created_at)"
           " VALUES (?,?,?,?,?,?)")
    outbox = ("INSERT INTO embedding_outbox(collection, op, ref_id, next_attempt_at, created_at)"
              " VALUES ('episodes', 'upsert', ?, ?, ?)")

    def op(i: int) -> None:
        user, ai = texts[i % len(texts)]
        now = utc_now()
        conn.execute("BEGIN IMMEDIATE")
        rowid = conn.execute(sql, (rng.randint(1, sessions), user, ai, len(user) // 4, "{}", now)).lastrowid
        conn.execute(outbox, (rowid, now, now))
        conn.execute("COMMIT")

    result = _timed(op, seconds)
    conn.execute("DELETE FROM embedding_outbox")  # the copy's worker must not embed these
    conn.close()
    return result


def raw_reads(db_path: Path, max_id: int, sessions: int, queries: list[str], seconds: float) -> dict:
    """The service's read SQL, verbatim, on a reader connection."""
    conn = _connect(db_path, writer=False)
    rng = random.Random(9)
    fts_sql = (
        "SELECT t.*, bm25(episodes_fts) AS rank_score FROM episodes_fts JOIN episodes t"
        " ON t.id = episodes_fts.rowid WHERE episodes_fts MATCH ? AND episodes_fts.rowid >= ? ORDER BY rank_score, t.id LIMIT ?+0"
    )
    # Each keyword query within the service's budget (domain.keywords.MATCH_BUDGET), planned the
    # way SqliteKeywordIndex plans it: match counts, terms left out, the newest matches only.
    plain = [plain_query(q) for q in queries]
    # POST /search's keyword leg: stop-words dropped, any term (OR), depth 50; then the union of
    # both legs' candidates (up to 100 ids) is fetched by id.
    recall = [recall_query(q) for q in queries]

    memo = CountMemo()  # as the service's readers keep theirs

    def within_budget(query, unbounded: bool = False) -> tuple[str, int]:
        if unbounded:
            return rows.fts_match(query), -(1 << 63)
        plan = _plan(conn, "episodes", query, scoped=False, memo=memo)
        match = rows.fts_match(plan.query)
        if plan.newest is None:
            return match, -(1 << 63)
        return match, conn.execute("SELECT min(rowid) FROM (SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?"
                                   " ORDER BY rowid DESC LIMIT ?+0)", (match, plan.newest)).fetchone()[0]

    def get_one(_: int) -> None:
        row = conn.execute("SELECT * FROM episodes WHERE id = ?", (rng.randint(1, max_id),)).fetchone()
        rows.episode_of(row)

    def session_page(_: int) -> None:
        session = rng.randint(1, sessions)
        conn.execute("SELECT count(*) FROM episodes WHERE session_id = ?", (session,)).fetchone()
        found = conn.execute(
            "SELECT * FROM episodes WHERE session_id = ? ORDER BY created_at, id LIMIT ?+0 OFFSET ?", (session, 20, 0)
        ).fetchall()
        [rows.episode_of(r) for r in found]

    def fts(i: int) -> None:
        found = conn.execute(fts_sql, (*within_budget(plain[i % len(plain)]), 10)).fetchall()
        [rows.episode_of(r) for r in found]

    def fts_recall(i: int, unbounded: bool = False) -> None:
        found = conn.execute(fts_sql, (*within_budget(recall[i % len(recall)], unbounded), 50)).fetchall()
        [rows.episode_of(r) for r in found]

    def fetch_candidates(_: int) -> None:
        ids = [rng.randint(1, max_id) for _ in range(100)]
        found = conn.execute(f"SELECT * FROM episodes WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall()
        [rows.episode_of(r) for r in found]

    for i in range(50):  # warm the pages both keyword rows read, so neither pays for the other's misses
        fts_recall(i)
        fts_recall(i, unbounded=True)
    result = {
        "get_episode": _timed(get_one, seconds),
        "fts_recall_top50": _timed(fts_recall, seconds),
        "fts_recall_top50_no_budget": _timed(lambda i: fts_recall(i, unbounded=True), seconds),
        "fetch_100_by_id": _timed(fetch_candidates, seconds),
        "session_episodes": _timed(session_page, seconds),
        "fts_query": _timed(fts, seconds),
    }
    conn.close()
    return result


def raw_vector_search(qdrant_path: Path, dimension: int, queries: list[str], seconds: float,
                      hnsw_ef: int = 128, limit: int = 50) -> dict:
    """A top-50 ``query`` (POST /search's depth) on the episodes shard (the adapter's request), vectors embedded beforehand;
    and the hash embedding of a query on its own, the other fixed cost of ``POST /search``."""
    shard = qe.EdgeShard.load(str(load.episodes_shard(qdrant_path)))
    vectors = [hash_vector(q, dimension) for q in queries]

    def search(i: int) -> None:
        shard.query(qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vectors[i % len(vectors)]), filter=None,
            score_threshold=None, params=qe.SearchParams(hnsw_ef=hnsw_ef), with_payload=False, with_vector=False,
        ))

    try:
        result = {"edge_search": _timed(search, seconds)}
    finally:
        shard.close()
    # Fresh strings so the embedder's feature cache is exercised as the server's would be.
    result["hash_embed"] = _timed(lambda i: hash_vector(queries[i % len(queries)] + " ", dimension), min(seconds, 1.0))
    return result

