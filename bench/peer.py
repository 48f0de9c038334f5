"""The Node.js original beside this service, same corpus, same routes, rounds alternating.

    .venv/bin/python bench/peer.py [--duration 8] [--rounds 2] [--json out.json]

The peer (``../shared/peer-node``: express 5 + better-sqlite3 12, ``synchronous=FULL`` by SQLite's
WAL default) is copied under ``bench/data/peer-node`` and installed there once with ``npm ci``
(``shared/`` is read-only). Both servers get the same corpus through their own APIs — 100 sessions
x 200 episodes of Zipf-distributed words (``load.TextGenerator``) — and the same wrk Lua scripts.
Each round runs every route on the peer and then on the project, the order swapped every round so
neither always runs on a warmer machine. The ratio is project req/s over peer req/s, the median
over rounds (with the range). After each POST row the store that took fewer POSTs is topped up
to the other's episode count (``level_stores``), so the rows after it read the same amount of text
on both sides rather than penalising the faster server's searches. This service runs as ``make run`` would serve it, with the embedded
Qdrant Edge index, ``EMBEDDER=hash`` and the embedding worker on.

Without ``npm`` on the PATH the comparison is skipped with one line; nothing else fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import load  # noqa: E402
from run import HOST, Server, Wrk, ensure_wrk, free_port, log, rss_mb  # noqa: E402

from adapters.sqlite.driver import sqlite3  # noqa: E402

PEER_SOURCE = ROOT.parent / "shared" / "peer-node"
PEER_HOME = load.DATA / "peer-node"
SESSIONS, PER_SESSION = 100, 200
MAINTENANCE_CHECK_S = 5.0  # INDEX_CHECK_SECONDS' default: how often the index manager looks for a build to start

# (row, wrk script, connections): the seed routes the peer serves, as the performance issue lists them.
ROUTES = [
    ("POST /episodes", "post_episode.lua", 32),
    ("GET /episodes/:id", "get_episode.lua", 32),
    ("GET /sessions/:id/episodes", "session_episodes.lua", 32),
    ("GET /episodes/search", "keyword_search.lua", 8),
    ("GET /episodes/search ", "keyword_search.lua", 1),
]


def ensure_peer() -> Path | None:
    """The peer installed under bench/data (reinstalled when its lock file changes); None without npm."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None
    lock = (PEER_SOURCE / "package-lock.json").read_bytes()
    installed = PEER_HOME / "package-lock.json"
    if (PEER_HOME / "node_modules" / "better-sqlite3").is_dir() and installed.is_file() and installed.read_bytes() == lock:
        return PEER_HOME
    shutil.rmtree(PEER_HOME, ignore_errors=True)
    PEER_HOME.mkdir(parents=True)
    for name in ("package.json", "package-lock.json", "server.js"):
        shutil.copyfile(PEER_SOURCE / name, PEER_HOME / name)
    log("installing the Node.js peer (npm ci; better-sqlite3 may build from source, a few minutes)")
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=PEER_HOME, check=True,
                   stdout=subprocess.DEVNULL)
    return PEER_HOME


class PeerServer:
    """``node server.js`` in a subprocess, answered on /health before it counts as started."""

    def __init__(self, home: Path, work: Path) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self._log = open(work / "peer.log", "wb")
        env = {**os.environ, "SQLITE_PATH": str(work / "peer.db"), "PORT": str(self.port)}
        env.pop("EMBEDDING_SERVICE_URL", None)
        self.proc = subprocess.Popen(["node", str(home / "server.js")], cwd=work, env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        deadline = time.perf_counter() + 60
        with httpx.Client(timeout=2) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the peer exited with {self.proc.returncode}; see {work}/peer.log")
                try:
                    if client.get(self.url + "/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.perf_counter() > deadline:
                    self.stop()
                    raise RuntimeError("the peer did not answer within 60 s")
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def corpus() -> list[list[tuple[str, str]]]:
    gen = load.TextGenerator(seed=15)
    return [[(gen.sentence(6, 24), gen.sentence(12, 48)) for _ in range(PER_SESSION)] for _ in range(SESSIONS)]


def fill_project(url: str, sessions: list[list[tuple[str, str]]]) -> None:
    """The corpus through the service's own API: sessions 1..100, each with its 200 episodes in one batch."""
    with httpx.Client(base_url=url, timeout=60) as client:
        for number, episodes in enumerate(sessions):
            session = client.post("/sessions", json={"externalId": f"peer-bench-{number}"})
            session.raise_for_status()
            sid = session.json()["id"]
            bodies = [{"sessionId": sid, "userMessage": u, "aiResponse": a} for u, a in episodes]
            client.post("/episodes/batch", json={"episodes": bodies}).raise_for_status()


def fill_peer(url: str, sessions: list[list[tuple[str, str]]]) -> None:
    """The same corpus through the peer's API (it has no batch route): four sessions at a time."""
    with ThreadPoolExecutor(4) as pool:
        # Sessions are created first, in order, so both stores number them alike.
        with httpx.Client(base_url=url, timeout=60) as client:
            ids = [client.post("/sessions", json={"externalId": f"peer-bench-{n}"}).json()["id"]
                   for n in range(len(sessions))]

        def post_all(pair: tuple[int, list[tuple[str, str]]]) -> None:
            sid, episodes = pair
            with httpx.Client(base_url=url, timeout=60) as client:
                for u, a in episodes:
                    client.post("/episodes", json={"sessionId": sid, "userMessage": u, "aiResponse": a}).raise_for_status()

        list(pool.map(post_all, zip(ids, sessions)))


def _episodes(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT count(*) FROM episodes").fetchone()[0]


def _sentence(rng: random.Random, words: list[str], low: int, high: int) -> str:
    """As report.lua's bench_sentence: the square of a uniform draw picks each word."""
    return " ".join(words[int(rng.random() ** 2 * len(words))] for _ in range(rng.randint(low, high)))


def level_stores(stores: dict[str, tuple[str, Path]], words: list[str], rng: random.Random) -> dict[str, int]:
    """After a POST row on both: the store that took fewer POSTs (the slower server) gets the
    difference, episodes made as the POST row makes them, so the rows after it read the same
    amount of text on both sides. Without this the faster server's keyword search ran over more
    episodes than the slower one's (each POST row adds its server's own throughput times the
    duration, and the posted episodes hold the frequent words, which is where a search spends
    its time). Answers how many episodes each side was given."""
    counts = {side: _episodes(db) for side, (_url, db) in stores.items()}
    most = max(counts.values())
    added = {}
    for side, (url, _db) in stores.items():
        added[side] = most - counts[side]
        with httpx.Client(base_url=url, timeout=60) as client:
            for _ in range(added[side]):
                body = {"sessionId": rng.randint(1, SESSIONS), "userMessage": _sentence(rng, words, 6, 24),
                        "aiResponse": _sentence(rng, words, 12, 48)}
                client.post("/episodes", json=body).raise_for_status()
    return added


def wait_for_index_builds(server: Server, limit_s: float) -> None:
    """Until no generation of the vector index is being built: loading 20k episodes starts a
    build in a child process, which is maintenance, not the cost of the requests measured (its CPU
    would be counted in the server's process tree)."""
    deadline = time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        index = server.health()["components"]["vectorIndex"].get("index") or {}
        if not any(c.get("building") for c in index.get("collections", {}).values()):
            return
        time.sleep(0.5)
    log(f"an index build was still running after {limit_s:.0f} s; measuring anyway")


def _wait_until_indexed(project: Server) -> None:
    """After writes: their episodes are embedded and may start an index build (maintenance at nice
    +10): both end before the next row, as after loading the corpus."""
    project.wait_for_backlog(120)
    time.sleep(MAINTENANCE_CHECK_S + 1)  # the manager decides on a build at its next check
    wait_for_index_builds(project, 600)


def compare(args, wrk_binary: str, home: Path) -> dict:
    sessions = corpus()
    gen = load.TextGenerator(seed=16)
    queries = gen.queries(2_000)
    work = Path(tempfile.mkdtemp(prefix="peer-bench-", dir=load.DATA))
    queries_file, words_file = work / "queries.txt", work / "words.txt"
    queries_file.write_text("\n".join(queries) + "\n")
    words = gen.words[:3000]
    words_file.write_text("\n".join(words) + "\n")
    rng = random.Random(17)
    wrk = Wrk(wrk_binary, {"BENCH_MAX_ID": str(SESSIONS * PER_SESSION), "BENCH_SESSIONS": str(SESSIONS),
                           "BENCH_QUERIES": str(queries_file), "BENCH_WORDS": str(words_file)})
    (work / "project").mkdir()
    (work / "peer").mkdir()
    log("peer comparison: loading the same corpus into both servers")
    peer = PeerServer(home, work / "peer")
    env = {"WORKERS": str(args.workers)} if getattr(args, "workers", None) else {}
    if getattr(args, "log_level", None):
        env["LOG_LEVEL"] = args.log_level
    project = Server(work / "project", env)
    results: dict = {"peer": {name: [] for name, _, _ in ROUTES}, "project": {name: [] for name, _, _ in ROUTES}}
    try:
        fill_peer(peer.url, sessions)
        fill_project(project.url, sessions)
        project.wait_for_backlog(300)
        wait_for_index_builds(project, 600)
        for side in (peer, project):
            wrk.run(side.url, "get_episode.lua", 8, 2)  # warm caches and connections
        for round_number in range(args.rounds):
            order = [("peer", peer), ("project", project)]
            if round_number % 2:
                order.reverse()
            for name, script, conns in ROUTES:
                for side_name, side in order:
                    log(f"peer comparison round {round_number + 1}: {side_name} {name.strip()} c{conns}")
                    row = wrk.run(side.url, script, conns, args.duration, side.pid)
                    results[side_name][name].append(row)
                    if script == "post_episode.lua" and side is project:
                        _wait_until_indexed(project)
                if script == "post_episode.lua":
                    added = level_stores({"peer": (peer.url, work / "peer" / "peer.db"),
                                          "project": (project.url, work / "project" / "memory.db")}, words, rng)
                    results.setdefault("levelled", []).append(added)
                    log(f"peer comparison: stores levelled after the POST row: {added} episodes added")
                    if added["project"]:
                        _wait_until_indexed(project)
        results["rss_mb"] = {"peer": rss_mb(peer.pid), "project": rss_mb(project.pid)}
    finally:
        peer.stop()
        project.stop()
        shutil.rmtree(work, ignore_errors=True)
    return results


def summarise(results: dict) -> list[dict]:
    rows = []
    for name, _, conns in ROUTES:
        peer, project = results["peer"][name], results["project"][name]
        ratios = [b["req_per_s"] / a["req_per_s"] for a, b in zip(peer, project) if a["req_per_s"]]
        med = lambda rs, key: statistics.median(r[key] for r in rs)  # noqa: E731
        rows.append({
            "route": name, "connections": conns,
            "peer_req_s": med(peer, "req_per_s"), "project_req_s": med(project, "req_per_s"),
            "peer_p50_ms": med(peer, "p50_ms"), "project_p50_ms": med(project, "p50_ms"),
            "peer_p99_ms": med(peer, "p99_ms"), "project_p99_ms": med(project, "p99_ms"),
            "peer_cpu_ms": _median_cpu(peer), "project_cpu_ms": _median_cpu(project),
            "errors": sum(r["errors"] for r in peer + project),
            "ratio": round(statistics.median(ratios), 2) if ratios else None,
            "ratio_range": [round(min(ratios), 2), round(max(ratios), 2)] if ratios else None,
        })
    return rows


def _loads(results: dict) -> list[float]:
    return [row["loadavg_1m_after"] for side in ("peer", "project") for rows in results[side].values() for row in rows]


def _ms(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


def _median_cpu(rows: list[dict]) -> float | None:
    """Server CPU ms per request (the whole process tree, from /proc), median over rounds."""
    values = [r["server_cpu_ms_per_req"] for r in rows if r.get("server_cpu_ms_per_req")]
    return round(statistics.median(values), 3) if values else None


def table(rows: list[dict], rss: dict, loads: list[float] | None = None) -> str:
    head = (f"{'route (peer = Node.js original)':<28} {'conns':>5} {'peer req/s':>10} {'ours req/s':>10} "
            f"{'ratio':>6} {'range':>11} {'p50 peer/ours ms':>17} {'p99 peer/ours ms':>17} {'CPU ms/req peer/ours':>20} "
            f"{'errors':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        span = f"{r['ratio_range'][0]:.2f}-{r['ratio_range'][1]:.2f}" if r["ratio_range"] else "-"
        lines.append(f"{r['route']:<28} {r['connections']:>5} {r['peer_req_s']:>10.0f} {r['project_req_s']:>10.0f} "
                     f"{r['ratio'] or 0:>6.2f} {span:>11} {r['peer_p50_ms']:>8.2f}/{r['project_p50_ms']:<8.2f} "
                     f"{r['peer_p99_ms']:>8.2f}/{r['project_p99_ms']:<8.2f} {_ms(r['peer_cpu_ms']):>10}/{_ms(r['project_cpu_ms']):<9} "
                     f"{r['errors']:>6}")
    processes = rss["project"].get("processes", 1)
    lines.append(f"{'RSS after the run':<28} {'':>5} {rss['peer']['rss_mb']:>8.0f}MB {rss['project']['rss_mb']:>8.0f}MB"
                 + (f"  (ours: {processes} processes summed)" if processes > 1 else ""))
    if loads:
        lines.append(f"load average (1 min) after each row: {min(loads):.2f}-{max(loads):.2f}")
    return "\n".join(lines)


def peer_comparison(args, wrk_binary: str) -> dict | None:
    """The comparison as run.py calls it: None (after one line) when npm is missing."""
    home = ensure_peer()
    if home is None:
        log("peer comparison skipped: npm/node not found (install Node.js 20 to compare with the original)")
        return None
    results = compare(args, wrk_binary, home)
    rows = summarise(results)
    return {"rows": rows, "rss_mb": results["rss_mb"], "rounds": args.rounds, "duration_s": args.duration,
            "raw": {k: results[k] for k in ("peer", "project")}, "table": table(rows, results["rss_mb"], _loads(results))}


def main() -> None:
    parser = argparse.ArgumentParser(description="This service beside the Node.js original, route by route.")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per wrk row")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (order swapped each round)")
    parser.add_argument("--json", type=Path, default=None, help="also write the record here")
    parser.add_argument("--workers", type=int, default=None,
                        help="WORKERS for this service (default: its own default, as make run serves)")
    parser.add_argument("--log-level", default=None,
                        help="LOG_LEVEL for this service (default: warning, as the throughput benchmarks serve: the peer"
                             " writes no request log; 'info', the service's default, adds one line per request)")
    args = parser.parse_args()
    record = peer_comparison(args, ensure_wrk())
    if record is None:
        return
    print(record["table"])
    if args.json:
        args.json.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
