"""The PostgreSQL store under load: the seed routes on one and on two replicas, and hybrid search.

    .venv/bin/python bench/postgres.py [--duration 5] [--episodes 20000] [--hybrid-episodes 100000]

A throwaway PostgreSQL 15 (``tests/support/postgres.py``; or the server ``TEST_DATABASE_URL``
names) holds one database per part. The replicas are two ``memory-service serve`` processes on
one database (``STORE=postgres``), each with its own in-memory vector index: the seed routes read
and write the store only, and a shared index would need a Qdrant server. wrk runs once per
replica at once, each with half the connections, and the row sums their rates. Hybrid search
(``POST /search``) is measured on one process with the embedded index over ``--hybrid-episodes``
episodes loaded through ``POST /episodes/batch`` with ``EMBEDDER=hash``, once the backlog is
drained and the index is consistent. Prints one table; nothing here is part of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import load  # noqa: E402
from run import Server, Wrk, ensure_wrk, log  # noqa: E402

from tests.support.postgres import PostgresServer  # noqa: E402

ROUTES = [  # (row, wrk script, connections in all)
    ("POST /episodes", "post_episode.lua", 32),
    ("GET /episodes/:id", "get_episode.lua", 32),
    ("GET /sessions/:id/episodes", "session_episodes.lua", 32),
    ("GET /episodes/search", "keyword_search.lua", 8),
]
PER_SESSION = 200
BATCH = 1000  # POST /episodes/batch's limit


def load_episodes(url: str, count: int, gen: load.TextGenerator) -> int:
    """``count`` episodes in sessions of ``PER_SESSION`` through the batch route; returns the sessions."""
    sessions = max(1, count // PER_SESSION)
    with httpx.Client(base_url=url, timeout=120) as client:
        ids = [client.post("/sessions", json={"externalId": f"bench-{n}"}).json()["id"] for n in range(sessions)]
        for start in range(0, count, BATCH):
            episodes = [{"sessionId": ids[(start + i) // PER_SESSION % sessions], "userMessage": gen.sentence(6, 24),
                         "aiResponse": gen.sentence(12, 48)} for i in range(min(BATCH, count - start))]
            answer = client.post("/episodes/batch", json={"episodes": episodes})
            answer.raise_for_status()
    return sessions


def wait_until_indexed(server: Server, limit_s: float) -> float:
    """Seconds until the backlog is empty and the index says consistent (gives up after ``limit_s``)."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        health = server.health()["components"]
        if health["embeddingBacklog"]["pending"] == 0 and health["vectorIndex"].get("status") == "ok":
            break
        time.sleep(0.5)
    return round(time.perf_counter() - started, 1)


def settle(servers: list[Server], limit_s: float = 30.0) -> None:
    """Wait until no request is in flight on any server. wrk closes its connections at the end of a
    row with requests still being handled (a write is finished, not dropped); until they are, they
    hold admission slots, and the next row's first requests would meet 503s at ``MAX_IN_FLIGHT``."""
    deadline = time.perf_counter() + limit_s
    for server in servers:
        while time.perf_counter() < deadline:
            scrape = httpx.get(f"{server.url}/metrics", timeout=10).text
            busy = next(float(line.split()[-1]) for line in scrape.splitlines()
                        if line.startswith("memory_http_requests_in_flight "))
            if busy == 0:
                break
            time.sleep(0.05)


def spread(wrk: Wrk, servers: list[Server], script: str, connections: int, seconds: float) -> dict:
    """One wrk per server at once, the connections split evenly; rates summed, the worst p50/p99."""
    settle(servers)
    share = max(1, connections // len(servers))
    with ThreadPoolExecutor(len(servers)) as pool:
        runs = list(pool.map(lambda s: wrk.run(s.url, script, share, seconds), servers))
    return {"req_per_s": round(sum(r["req_per_s"] for r in runs), 1),
            "p50_ms": max(r["p50_ms"] for r in runs), "p99_ms": max(r["p99_ms"] for r in runs),
            "errors": sum(r["errors"] for r in runs),
            "error_detail": {k: sum(r["error_detail"][k] for r in runs) for k in runs[0]["error_detail"]},
            "replicas": len(servers), "connections": share * len(servers)}


def bench_replicas(pg: PostgresServer, wrk_binary: str, args, work: Path, words: Path, queries: Path) -> list[dict]:
    url = pg.new_database()
    env = {"STORE": "postgres", "DATABASE_URL": url, "VECTOR_INDEX": "memory", "EMBEDDING_DIM": "64"}
    dirs = [work / f"replica-{n}" for n in (1, 2)]
    for d in dirs:
        d.mkdir()
    first = Server(dirs[0], env)
    second = None
    try:
        log(f"replicas: loading {args.episodes} episodes")
        sessions = load_episodes(first.url, args.episodes, load.TextGenerator(seed=7))
        second = Server(dirs[1], env)
        wrk = Wrk(wrk_binary, {"BENCH_MAX_ID": str(args.episodes), "BENCH_SESSIONS": str(sessions),
                               "BENCH_QUERIES": str(queries), "BENCH_WORDS": str(words)})
        rows = []
        for name, script, connections in ROUTES:
            for servers in ([first], [first, second]):
                row = spread(wrk, servers, script, connections, args.duration)
                log(f"{name} x{len(servers)}: {row['req_per_s']} req/s, p50 {row['p50_ms']} ms, "
                    f"errors {row['error_detail']}")
                rows.append({"route": name, **row})
        return rows
    finally:
        for server in (first, second):
            if server is not None:
                server.stop()


def bench_hybrid(pg: PostgresServer, wrk_binary: str, args, work: Path, words: Path, queries: Path) -> dict:
    home = work / "hybrid"
    home.mkdir()
    env = {"STORE": "postgres", "DATABASE_URL": pg.new_database(), "EMBEDDING_DIM": "64"}
    server = Server(home, env)  # the embedded Qdrant Edge index beside SQLITE_PATH's directory
    try:
        started = time.perf_counter()
        log(f"hybrid: loading {args.hybrid_episodes} episodes")
        sessions = load_episodes(server.url, args.hybrid_episodes, load.TextGenerator(seed=11))
        loaded = round(time.perf_counter() - started, 1)
        indexed = wait_until_indexed(server, 1800)
        wrk = Wrk(wrk_binary, {"BENCH_MAX_ID": str(args.hybrid_episodes), "BENCH_SESSIONS": str(sessions),
                               "BENCH_QUERIES": str(queries), "BENCH_WORDS": str(words)})
        row = wrk.run(server.url, "hybrid_search.lua", 1, args.duration)
        keyword = wrk.run(server.url, "keyword_search.lua", 1, args.duration)
        return {"episodes": args.hybrid_episodes, "load_s": loaded, "indexed_after_s": indexed,
                "search": row, "keyword": keyword}
    finally:
        server.stop()


def table(rows: list[dict], hybrid: dict | None) -> str:
    lines = ["| route | replicas | connections | req/s | p50 ms | p99 ms | errors |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['route']} | {r['replicas']} | {r['connections']} | {r['req_per_s']} | "
                     f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['errors']} |")
    if hybrid:
        for name, key in (("POST /search (hybrid)", "search"), ("GET /episodes/search", "keyword")):
            r = hybrid[key]
            lines.append(f"| {name} at {hybrid['episodes']:,} episodes | 1 | 1 | {r['req_per_s']} | "
                         f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['errors']} |")
        lines.append(f"\nloaded in {hybrid['load_s']} s; backlog drained and index consistent "
                     f"{hybrid['indexed_after_s']} s later")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per wrk row")
    parser.add_argument("--episodes", type=int, default=20_000, help="episodes behind the replica rows")
    parser.add_argument("--hybrid-episodes", type=int, default=100_000, help="episodes for hybrid search; 0 skips")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    wrk_binary = ensure_wrk()
    gen = load.TextGenerator()
    pg = PostgresServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="pg-bench-") as tmp:
            work = Path(tmp)
            queries, words = work / "queries.txt", work / "words.txt"
            queries.write_text("\n".join(gen.queries(2_000)) + "\n")
            words.write_text("\n".join(gen.words[:3000]) + "\n")
            rows = bench_replicas(pg, wrk_binary, args, work, words, queries)
            hybrid = bench_hybrid(pg, wrk_binary, args, work, words, queries) if args.hybrid_episodes else None
    finally:
        pg.stop()
    print(table(rows, hybrid))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "hybrid": hybrid}, indent=2))


if __name__ == "__main__":
    main()
