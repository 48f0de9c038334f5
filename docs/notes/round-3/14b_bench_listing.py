"""Keyset page cost at N episodes over 1,000 sessions: a page deep in the walk costs what the first
does (position, not offset), and the (created_at, id) index makes a cross-session page a range scan.

    .venv/bin/python docs/notes/round-3/14b_bench_listing.py 100000 [--no-index]
"""

import asyncio
import os
import sys
import tempfile
import time

from adapters.sqlite.store import SqliteStore
from domain.listing import ListQuery, Position
from domain.models import utc_now


async def main(n: int) -> None:
    store = SqliteStore.open(os.path.join(tempfile.mkdtemp(), "m.db"), "normal")

    def fill(conn):
        now = utc_now()
        conn.executemany("INSERT INTO sessions(external_id, metadata, created_at, updated_at) VALUES (?,?,?,?)",
                         [(f"s{i}", "{}", now, now) for i in range(1000)])
        conn.executemany(
            "INSERT INTO episodes(session_id, user_message, ai_response, metadata, created_at) VALUES (?,?,?,?,?)",
            [(i % 1000 + 1, f"u{i}", "a", f'{{"n": {i % 7}}}', f"2025-01-01T00:00:{i % 60:02d}.{i % 1000:03d}Z")
             for i in range(n)])

    await store.database.write(fill)
    if "--no-index" in sys.argv:  # the same walk without this branch's migration's index
        await store.database.write(lambda conn: conn.execute("DROP INDEX idx_episodes_created"))
    plan = await store.database.read(lambda c: c.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM episodes WHERE 1 ORDER BY created_at DESC, id DESC LIMIT 21").fetchall())
    print("plan:", [row[-1] for row in plan])

    async def timed(label, query, rounds=200):
        await store.listing.episodes(query)
        t0 = time.perf_counter()
        for _ in range(rounds):
            await store.listing.episodes(query)
        print(f"{label}: {(time.perf_counter() - t0) / rounds * 1e3:.2f} ms/page")

    first = await store.listing.episodes(ListQuery(limit=20, order="desc"))
    await timed("first page, all sessions, newest first", ListQuery(limit=20, order="desc"))
    deep = Position("2025-01-01T00:00:01.000Z", n // 2)
    await timed("a page half-way through the walk", ListQuery(limit=20, order="desc", after=deep))
    await timed("one session, oldest first", ListQuery(limit=20, session_id=7))
    from domain.filters import parse_filter
    await timed("metadata filter n=3 (json_each per row scanned)",
                ListQuery(limit=20, metadata=parse_filter({"metadata": {"n": 3}})), rounds=50)
    assert first.next is not None
    await store.close()


asyncio.run(main(int(sys.argv[1])))
