"""Measurements: the cost of ``SQLITE_SYNCHRONOUS=full`` and admission control under load.

    .venv/bin/python bench/hardening.py [--synchronous-seconds 5] [--overload-seconds 10]
                                        [--connections 8,64,256] [--max-in-flight 64] [--scale 10k]
                                        [--limits 64,0] [--health-every 0.02] [--baseline-tree DIR]
                                        [--profile]

1. **synchronous**: the real store (``SqliteStore``, group-committing writer) on a scratch
   file, ``add_episodes`` of one episode from 1, 8 and 64 concurrent writers, FULL against NORMAL:
   writes/s and p50/p99 latency. Group commit shares one fsync between the writers waiting, so the
   cost of FULL shrinks as concurrency grows.
2. **overload**: ``memory-service serve`` on a scratch copy of the bench store, ``mixed.lua``
   under wrk at each connection count, with admission control on (``MAX_IN_FLIGHT``) and off
   (``0``): throughput, wrk's p99 over every answer, the p99 of *admitted* requests (from the
   server's own latency histogram, 503s left out), admitted requests per second (the server's
   count), the 503 share, the server's CPU-ms per answer (from /proc) with the load average, and
   ``/health``, ``/health/live``, ``/health/ready`` latency (p50/p99/max) from one client polling
   them in turn every ``--health-every`` seconds while the load runs. ``--baseline-tree`` runs a
   second server from another checkout's code (``git archive main | tar -x -C DIR``) with rows
   alternating, so a before/after ratio comes from one run under the same load.

A benchmark, never a test: every loop is bounded, only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import load  # noqa: E402
from run import RESULTS, Server, Wrk, ensure_wrk, log, summarise_profile  # noqa: E402

from adapters.sqlite.store import SqliteStore  # noqa: E402
from domain import writes
from domain.models import NewEpisode  # noqa: E402


# -- 1. synchronous = FULL vs NORMAL ----------------------------------------------------------------
async def _write_rate(path: Path, synchronous: str, writers: int, seconds: float) -> dict:
    store = SqliteStore.open(str(path), synchronous)
    session = await store.uow.run(lambda tx: writes.create_session(tx, f"bench-{synchronous}-{writers}", {}))
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def writer(number: int) -> None:
        count = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, f"writer {number} message {count}", "a reply")]))
            latencies.append(time.perf_counter() - started)
            count += 1

    started = time.perf_counter()
    await asyncio.gather(*(writer(n) for n in range(writers)))
    elapsed = time.perf_counter() - started
    await store.close()
    latencies.sort()
    return {"synchronous": synchronous, "writers": writers, "writes": len(latencies),
            "writes_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": round(1e3 * latencies[len(latencies) // 2], 3),
            "p99_ms": round(1e3 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 3)}


def bench_synchronous(seconds: float, directory: Path) -> list[dict]:
    rows = []
    for writers in (1, 8, 64):
        for mode in ("full", "normal"):
            path = directory / f"sync-{mode}-{writers}.db"
            log(f"synchronous={mode}, {writers} concurrent writers, {seconds:g} s")
            rows.append(asyncio.run(_write_rate(path, mode, writers, seconds)))
    return rows


# -- 2. admission control under mixed load ------------------------------------------------------------
def _histogram(url: str) -> dict[float, float]:
    """Cumulative bucket counts of every admitted (non-503) request, summed over routes."""
    text = httpx.get(url + "/metrics", timeout=30).text
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if not line.startswith("memory_http_request_duration_seconds_bucket{") or 'status="503"' in line:
            continue
        labels, value = line.rsplit(" ", 1)
        bound = labels.split('le="', 1)[1].split('"', 1)[0]
        key = float("inf") if bound == "+Inf" else float(bound)
        buckets[key] = buckets.get(key, 0.0) + float(value)
    return buckets


def _quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    deltas = sorted((bound, after.get(bound, 0.0) - before.get(bound, 0.0)) for bound in after)
    total = _count(before, after)
    if total <= 0:
        return None
    return next(bound for bound, count in deltas if count >= q * total)


HEALTH_PATHS = ("/health", "/health/live", "/health/ready")


def _count(before: dict[float, float], after: dict[float, float]) -> float:
    """Admitted requests between the two scrapes (the +Inf bucket counts every one)."""
    return after.get(float("inf"), 0.0) - before.get(float("inf"), 0.0)


def _probe_health(url: str, stop: threading.Event, samples: list[float], every: float) -> None:
    """One keep-alive client polling the three health paths in turn every ``every`` seconds for the
    whole row; each sample is one answered request, from send to the last byte (a failure counts
    as the full client timeout, so it cannot hide)."""
    with httpx.Client(timeout=30) as client:
        for path in itertools.cycle(HEALTH_PATHS):
            if stop.is_set():
                break
            started = time.perf_counter()
            try:
                client.get(url + path)
                samples.append(time.perf_counter() - started)
            except httpx.HTTPError:
                samples.append(30.0)
            stop.wait(every)


def _percentile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return round(1e3 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def _variants(args) -> list[tuple[str, int, dict[str, str]]]:
    """(label, MAX_IN_FLIGHT, extra environment) for every server to measure."""
    variants = [("this tree", limit, {}) for limit in args.limits]
    if args.baseline_tree:
        # The same bench against another checkout's code (e.g. ``git archive main | tar -x``):
        # its ``app`` package comes first on the server's path. Rows alternate with this tree's,
        # so both see the same load on a shared machine.
        tree = str(Path(args.baseline_tree).resolve())
        variants += [(f"baseline {Path(tree).name}", limit, {"PYTHONPATH": tree}) for limit in args.limits]
    return variants


def _row(server, wrk, args, label: str, limit: int, connections: int) -> dict:
    log(f"mixed load, {label}, MAX_IN_FLIGHT={limit}, {connections} connections, {args.overload_seconds:g} s")
    before = _histogram(server.url)
    stop, health = threading.Event(), []
    prober = threading.Thread(target=_probe_health, args=(server.url, stop, health, args.health_every))
    prober.start()
    profile = None
    if args.profile:
        profile = RESULTS / f"hardening-profile-{label.replace(' ', '_')}-{limit}-{connections}.txt"
    started = time.perf_counter()
    measured = wrk.run(server.url, "mixed.lua", connections, args.overload_seconds, server.pid, profile_out=profile)
    elapsed = time.perf_counter() - started
    stop.set()
    prober.join()
    after = _histogram(server.url)
    rejected = measured["error_detail"]["status"]  # 503s, and 404s for ids deleted meanwhile
    admitted = _count(before, after)  # the server's count: every answer but 503 (health polls included)
    row = {
        "code": label, "max_in_flight": limit, "connections": connections, "req_per_s": measured["req_per_s"],
        "admitted_per_s": round(max(0.0, admitted - len(health)) / elapsed, 1),
        "p99_ms_all": measured["p99_ms"], "p99_ms_admitted": _ms(_quantile(before, after, 0.99)),
        "non_2xx_share": round(rejected / measured["requests"], 4) if measured["requests"] else None,
        "timeouts": measured["error_detail"]["timeout"],
        "server_cpu_ms_per_req": measured["server_cpu_ms_per_req"],
        "loadavg_1m": measured["loadavg_1m_after"],
        "health_samples": len(health),
        "health_p50_ms": _percentile(health, 0.5), "health_p99_ms": _percentile(health, 0.99),
        "health_max_ms": _percentile(health, 1.0),
    }
    if profile is not None:
        row["profile"] = summarise_profile(profile)
    return row


def bench_overload(args, wrk_binary: str, queries_file: Path, words_file: Path) -> list[dict]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    manifest = load.ensure_store(args.scale, log)
    wrk = Wrk(wrk_binary, {"BENCH_MAX_ID": str(manifest["episodes"]), "BENCH_SESSIONS": str(manifest["sessions"]),
                           "BENCH_QUERIES": str(queries_file), "BENCH_WORDS": str(words_file)})
    servers = []
    rows = []
    try:
        for label, limit, env in _variants(args):
            scratch = load.scratch_copy(args.scale) if not servers else _second_copy(args.scale, len(servers))
            server = Server(scratch, {"MAX_IN_FLIGHT": str(limit), **env}, probe_path="/episodes/1")
            servers.append((label, limit, server))
            wrk.run(server.url, "mixed.lua", 8, 2)  # warm up
        for connections in args.connections:
            for label, limit, server in servers:
                rows.append(_row(server, wrk, args, label, limit, connections))
                server.wait_for_backlog(120)
    finally:
        for _, _, server in servers:
            server.stop()
    return rows


def _second_copy(scale: str, number: int) -> Path:
    """Another scratch copy of the pristine store, for a server running beside the first."""
    import shutil

    source, target = load.scale_dir(scale), load.DATA / f"run-{scale}-{number}"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.copy2(source / "memory.db", target / "memory.db")
    if (source / "memory.db.qdrant").is_dir():
        shutil.copytree(source / "memory.db.qdrant", target / "memory.db.qdrant")
    return target


def _ms(seconds: float | None) -> float | str | None:
    if seconds is None:
        return None
    return f">{1e3 * 10:g}" if seconds == float("inf") else round(1e3 * seconds, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description="Measure synchronous=FULL's cost and admission control.")
    parser.add_argument("--synchronous-seconds", type=float, default=5.0, help="per row; 0 skips")
    parser.add_argument("--overload-seconds", type=float, default=10.0, help="per wrk row; 0 skips")
    parser.add_argument("--connections", default="8,64,256")
    parser.add_argument("--max-in-flight", type=int, default=32)
    parser.add_argument("--scale", default="10k")
    parser.add_argument("--health-every", type=float, default=0.02,
                        help="seconds between /health polls during each overload row (one client)")
    parser.add_argument("--limits", default=None, help="MAX_IN_FLIGHT values to run, e.g. 64,0 (default: the "
                        "--max-in-flight value, then 0 = off)")
    parser.add_argument("--baseline-tree", default=None, help="also run the server from this checkout's code "
                        "(rows alternate with this tree's)")
    parser.add_argument("--profile", action="store_true", help="py-spy the server during each row (bench/results/)")
    args = parser.parse_args()
    args.connections = [int(c) for c in args.connections.split(",")]
    args.limits = [int(x) for x in args.limits.split(",")] if args.limits else [args.max_in_flight, 0]
    record: dict = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                    "started": datetime.now(UTC).isoformat(timespec="seconds")}
    with tempfile.TemporaryDirectory() as tmp:
        if args.synchronous_seconds > 0:
            record["synchronous"] = bench_synchronous(args.synchronous_seconds, Path(tmp))
            print("\nsynchronous   writers  writes/s   p50 ms   p99 ms")
            for row in record["synchronous"]:
                print(f"{row['synchronous']:<12} {row['writers']:>8} {row['writes_per_s']:>9} "
                      f"{row['p50_ms']:>8} {row['p99_ms']:>8}")
        if args.overload_seconds > 0:
            gen = load.TextGenerator()
            queries_file, words_file = Path(tmp) / "queries.txt", Path(tmp) / "words.txt"
            queries_file.write_text("\n".join(gen.queries(2_000)) + "\n")
            words_file.write_text("\n".join(gen.words[:3000]) + "\n")
            record["overload"] = bench_overload(args, ensure_wrk(), queries_file, words_file)
            print("\ncode                max_in_flight  conns   req/s  admitted/s  p99 ms (all)  p99 ms (admitted)  non-2xx  timeouts"
                  "  cpu ms/req  load  /health p50/p99/max ms (n)")
            for row in record["overload"]:
                print(f"{row['code']:<20}{row['max_in_flight']:>13} {row['connections']:>6} {row['req_per_s']:>7} "
                      f"{row['admitted_per_s']:>11} {row['p99_ms_all']:>13} {row['p99_ms_admitted']!s:>18} "
                      f"{row['non_2xx_share']:>8} {row['timeouts']:>9} {row['server_cpu_ms_per_req']!s:>11} "
                      f"{row['loadavg_1m']:>5}  {row['health_p50_ms']}/{row['health_p99_ms']}/"
                      f"{row['health_max_ms']} ({row['health_samples']})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    target = RESULTS / f"hardening-{record['started'].replace(':', '')}.json"
    target.write_text(json.dumps(record, indent=2))
    print(f"\nwritten to {target}")


if __name__ == "__main__":
    main()
