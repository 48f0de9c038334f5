"""``make bench``: the real server under wrk, against the in-process ceilings, in one run.

    .venv/bin/python bench/run.py [--scales 10k,100k[,1m]] [--duration 10] [--soak-seconds 300]

For each scale: a scratch copy of the bulk-loaded store (bench/load.py, built once), the raw
ceilings on it (bench/ceiling.py), then ``memory-service serve`` (uvicorn + uvloop + httptools,
EMBEDDER=hash, the embedding worker on) on 127.0.0.1 and a free port, driven by wrk from its own
process with the Lua scripts beside this file. Then the embedding-backlog drain against a fake
Ollama server, one table on stdout and the whole record as JSON under bench/results/.
A benchmark, never a test: pytest does not collect it, and every loop is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

import ceiling  # noqa: E402
import load  # noqa: E402
from domain.keywords import MATCH_BUDGET  # noqa: E402

VENV_BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
RESULTS = BENCH / "results"
PROFILES = BENCH / "data" / "profiles"  # raw py-spy stacks: large, so beside the gitignored stores
QUERY_COUNT = 2_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- tools ---------------------------------------------------------------------------------------
def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    log("wrk not found: installing it from Debian's packages")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "wrk"], check=True,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    return shutil.which("wrk") or "/usr/bin/wrk"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live descendant (with ``WORKERS`` > 1 the service is a supervisor and its
    worker processes: the figures below must cover them all)."""
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                queue.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:  # gone meanwhile
            continue
    return pids


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of ``pid`` and its descendants (all threads), counting the
    children each of them already reaped: a replaced worker's time is then in the supervisor's
    cutime/cstime, and an index build child's in its worker's (counting only the root's made the
    difference negative when a worker's child ended between two readings)."""
    ticks = 0
    for current in process_tree(pid):
        try:
            fields = _stat_fields(current)
        except OSError:
            continue
        ticks += sum(int(field) for field in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> dict:
    """Resident memory of ``pid`` and its descendants, summed (``processes`` says how many): shared
    library pages count once per process, as ``ps`` would show them side by side; the peak is the
    sum of each process's own peak (an upper bound of the tree's peak)."""
    totals = {"VmRSS": 0, "VmHWM": 0}
    count = 0
    for current in process_tree(pid):
        try:
            lines = Path(f"/proc/{current}/status").read_text().splitlines()
        except OSError:
            continue
        count += 1
        for line in lines:
            key, _, value = line.partition(":")
            if key in totals:
                totals[key] += int(value.split()[0])
    return {"rss_mb": round(totals["VmRSS"] / 1024, 1), "peak_rss_mb": round(totals["VmHWM"] / 1024, 1),
            "processes": count}


# -- the server ----------------------------------------------------------------------------------
class Server:
    """``memory-service serve`` in a subprocess; ``startup_s`` is spawn to first answered request."""

    def __init__(self, store_dir: Path, env: dict[str, str], probe_path: str = "/health") -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self._log = open(store_dir / "server.log", "wb")
        full_env = {
            **os.environ, "SQLITE_PATH": str(store_dir / "memory.db"), "HOST": HOST, "PORT": str(self.port),
            "EMBEDDER": "hash", "EMBEDDING_DIM": str(load.DIMENSION), "VECTOR_INDEX": "edge",
            "LOG_LEVEL": "warning", **env,
        }
        started = time.perf_counter()
        self.proc = subprocess.Popen([str(VENV_BIN / "memory-service"), "serve"], env=full_env, cwd=store_dir,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        deadline = started + 60
        with httpx.Client(timeout=2) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the server exited with {self.proc.returncode}; see {store_dir}/server.log")
                try:
                    if client.get(self.url + probe_path).status_code < 500:
                        break
                except httpx.TransportError:
                    pass
                if time.perf_counter() > deadline:
                    self.stop()
                    raise RuntimeError("the server did not answer within 60 s")
                time.sleep(0.01)
        self.startup_s = round(time.perf_counter() - started, 3)

    def health(self) -> dict:
        return httpx.get(self.url + "/health", timeout=10).json()

    def wait_for_backlog(self, limit_s: float) -> float:
        """Seconds until the embedding backlog is empty (gives up after ``limit_s``)."""
        started = time.perf_counter()
        while time.perf_counter() - started < limit_s:
            if self.health()["components"]["embeddingBacklog"]["pending"] == 0:
                break
            time.sleep(0.1)
        return round(time.perf_counter() - started, 2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


# -- wrk -----------------------------------------------------------------------------------------
class Wrk:
    def __init__(self, binary: str, lua_env: dict[str, str]) -> None:
        self.binary = binary
        self.env = {**os.environ, "BENCH_LUA_DIR": str(BENCH), **lua_env}

    def run(self, url: str, script: str, connections: int, seconds: float, server_pid: int | None = None,
            profile_out: Path | None = None) -> dict:
        command = [self.binary, "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s",
                   "-s", str(BENCH / script), url]
        spy = None
        cpu_before = cpu_seconds(server_pid) if server_pid else 0.0
        if server_pid is not None and profile_out is not None:
            spy = subprocess.Popen(
                [str(VENV_BIN / "py-spy"), "record", "--pid", str(server_pid), "--duration",
                 str(max(1, round(seconds) - 1)), "--rate", "200", "--threads", "--format", "raw",
                 "--nonblocking", "-o", str(profile_out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=seconds + 60)
        cpu = cpu_seconds(server_pid) - cpu_before if server_pid else None
        if spy is not None:
            spy.wait(timeout=60)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("BENCH_RESULT ")), None)
        if line is None:
            raise RuntimeError(f"wrk gave no result: {done.stdout}\n{done.stderr}")
        raw = json.loads(line.removeprefix("BENCH_RESULT "))
        errors = sum(raw[k] for k in ("connect", "read", "write", "status", "timeout"))
        return {
            "connections": connections, "requests": raw["requests"],
            "req_per_s": round(raw["requests"] / (raw["duration_us"] / 1e6), 1),
            "p50_ms": raw["p50_us"] / 1e3, "p99_ms": raw["p99_us"] / 1e3, "max_ms": raw["max_us"] / 1e3,
            "loadavg_1m_after": round(os.getloadavg()[0], 2),
            "server_cpu_ms_per_req": round(1e3 * cpu / raw["requests"], 3) if cpu and raw["requests"] else None,
            "errors": errors, "error_detail": {k: raw[k] for k in ("connect", "read", "write", "status", "timeout")},
        }


def summarise_profile(path: Path, top: int = 12) -> dict:
    """Collapsed py-spy stacks -> share of samples per thread and the hottest leaf frames."""
    threads: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    if not path.is_file():
        return {"error": "py-spy wrote nothing (is ptrace allowed?)"}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        n = int(count)
        total += n
        threads[frames[0]] += n
        leaves[frames[-1]] += n
    share = lambda c: {k: round(100 * v / total, 1) for k, v in c.most_common(top)}  # noqa: E731
    return {"samples": total, "threads_pct": share(threads), "leaf_frames_pct": share(leaves)}


# -- one scale -------------------------------------------------------------------------------------
def bench_scale(scale: str, wrk_binary: str, args, queries_file: Path, words_file: Path, queries: list[str]) -> dict:
    sqlite_only = scale in args.sqlite_only
    manifest = load.ensure_store(scale, log, index=not sqlite_only, stale_index=args.stale_index)
    scratch = load.scratch_copy(scale, index=not sqlite_only)
    stale = not sqlite_only and load.reindex_pending(scratch / "memory.db")
    if stale:  # --stale-index: serve the index as it is (its points lack owner/metadata payloads)
        log(f"[{scale}] --stale-index: the scratch copy's reindex request is dropped, no rebuild under the rows")
        load.drop_reindex_request(scratch / "memory.db")
    db, qdrant = scratch / "memory.db", scratch / "memory.db.qdrant"
    n, sessions = manifest["episodes"], manifest["sessions"]
    out: dict = {"scale": scale, "loadavg_1m_before": round(os.getloadavg()[0], 2), "episodes": n,
                 "sessions": sessions, "dimension": manifest["dimension"],
                 "load_seconds": manifest["load_seconds"], "stale_index_reindex_request_dropped": stale}

    log(f"[{scale}] ceilings (in-process, single thread)")
    seconds = max(1.0, args.duration / 2)
    gen = load.TextGenerator(seed=99)
    texts = [(gen.sentence(6, 24), gen.sentence(12, 48)) for _ in range(5_000)]
    out["ceiling"] = {
        **ceiling.raw_reads(db, n, sessions, queries, seconds),
        **({} if sqlite_only else ceiling.raw_vector_search(qdrant, manifest["dimension"], queries, seconds)),
        "insert": ceiling.raw_insert(db, sessions, texts, seconds),
        "insert_with_outbox": ceiling.raw_insert_with_outbox(db, sessions, texts, seconds),
    }

    log(f"[{scale}] starting the server")
    # SQLite-only: the store has no vector index, and building one (hours at 1M here) must not run
    # under the rows; a disk reserve above any free space makes the index manager wait instead.
    env = {"INDEX_DISK_RESERVE_MB": str(10**9)} if sqlite_only else {}
    if args.no_keyword_budget:  # the "before": every keyword match ranked (bench/no_keyword_budget/)
        env["PYTHONPATH"] = str(BENCH / "no_keyword_budget")
    server = Server(scratch, env, probe_path="/episodes/1")
    out["sqlite_only"] = sqlite_only
    out["startup_s"] = server.startup_s
    out["memory"] = {"idle": rss_mb(server.pid)}
    wrk = Wrk(wrk_binary, {"BENCH_MAX_ID": str(n), "BENCH_SESSIONS": str(sessions),
                           "BENCH_QUERIES": str(queries_file), "BENCH_WORDS": str(words_file)})
    rows: dict = {}
    try:
        wrk.run(server.url, "mixed.lua", 8, 2)  # warm the caches and connections
        server.wait_for_backlog(60)
        plan = [
            ("GET /episodes/:id", "get_episode.lua", 8),
            ("GET /sessions/:id/episodes", "session_episodes.lua", 8),
            ("GET /episodes/search", "keyword_search.lua", 8),
            ("GET /episodes/search c1", "keyword_search.lua", 1),  # latency without queueing
            ("POST /search", "hybrid_search.lua", 8),
            ("POST /search c1", "hybrid_search.lua", 1),
            ("POST /episodes c1", "post_episode.lua", 1),
            ("POST /episodes c8", "post_episode.lua", 8),
            ("POST /episodes c32", "post_episode.lua", 32),
        ]
        if sqlite_only:
            # No index: writes would only queue vector work. /search answers from its keyword leg
            # alone (degraded: the vector index is unavailable): the whole request but the HNSW search.
            plan = [(name.replace("POST /search", "POST /search keyword leg only"), script, conns)
                    for name, script, conns in plan if script != "post_episode.lua"]
        if args.rows:
            plan = [row for row in plan if any(part in row[0] for part in args.rows.split(","))]
        for name, script, conns in plan:
            log(f"[{scale}] {name} ({conns} connections, {args.duration:g} s)")
            rows[name] = wrk.run(server.url, script, conns, args.duration, server.pid)
            if script == "post_episode.lua":
                rows[name]["backlog_drain_after_s"] = server.wait_for_backlog(120)
        out["memory"]["after_rows"] = rss_mb(server.pid)
        if args.profile:
            out["profile"] = {}
            for name, script, conns in [("POST /episodes c32", "post_episode.lua", 32),
                                        ("GET /episodes/search", "keyword_search.lua", 8),
                                        ("POST /search", "hybrid_search.lua", 8)]:
                target = PROFILES / f"{scale}-{script.removesuffix('.lua')}.txt"
                log(f"[{scale}] py-spy on {name}")
                measured = wrk.run(server.url, script, conns, args.duration, server.pid, target)
                out["profile"][name] = {"under_py_spy": measured, **summarise_profile(target)}
                if script == "post_episode.lua":
                    server.wait_for_backlog(120)
        if args.soak_seconds > 0 and scale == args.soak_scale:
            out["soak"] = soak(server, wrk, args.soak_seconds)
    finally:
        server.stop()
    out["rows"] = rows
    shutil.rmtree(scratch, ignore_errors=True)
    return out


def soak(server: Server, wrk: Wrk, seconds: int, segment: int = 60) -> dict:
    """``mixed.lua`` at 8 connections for ``seconds``, in segments of ``segment`` seconds.

    Each segment records its own req/s, p50/p99 and the server's RSS after it, so growth shows as
    a trend (first vs last segment), not just one number at the end. The mix writes (15 % POST
    /episodes), so the store grows during the soak; RSS growth is read against that.
    """
    before = rss_mb(server.pid)
    log(f"  mixed soak, {seconds} s in segments of {segment} s")
    segments, done = [], 0
    while done < seconds:
        length = min(segment, seconds - done)
        row = wrk.run(server.url, "mixed.lua", 8, length, server.pid)
        done += length
        segments.append({**row, "at_s": done, "rss": rss_mb(server.pid)})
    server.wait_for_backlog(120)
    first, last = segments[0], segments[-1]
    requests = sum(x["requests"] for x in segments)
    return {"seconds": seconds, "segment_s": segment, "requests": requests, "req_per_s": round(requests / seconds, 1),
            "errors": sum(x["errors"] for x in segments), "rss_before": before, "rss_after": rss_mb(server.pid),
            "first": {k: first[k] for k in ("req_per_s", "p50_ms", "p99_ms", "loadavg_1m_after")},
            "last": {k: last[k] for k in ("req_per_s", "p50_ms", "p99_ms", "loadavg_1m_after")},
            "p50_last_over_first": round(last["p50_ms"] / first["p50_ms"], 3),
            "rss_growth_mb": round(last["rss"]["rss_mb"] - first["rss"]["rss_mb"], 1),
            "segments": segments}


# -- the vector index as a cache of SQLite ----------------------------------------------
def bench_index(scales: list[dict], reembed_sample: int, bulk_episodes: int) -> dict:
    """Rebuild from stored embeddings (timed when each store was loaded: bench/load.py builds its
    index with the service's IndexManager from SQLite alone, the embedder down), the re-embedding
    it spared (the default local model's rate on a sample, extrapolated), and the degraded share
    of ``POST /search`` during a 0 -> ``bulk_episodes`` bulk load (bench/index_bench.py)."""
    import index_bench

    out: dict = {"rebuild_from_stored": {s["scale"]: {**load.manifest(s["scale"])["rebuild_from_stored"],
                                                     "episodes": s["episodes"]}
                                         for s in scales if "rebuild_from_stored" in load.manifest(s["scale"])}}
    if reembed_sample > 0:
        log(f"re-embedding rate of the default local model on {reembed_sample} texts")
        rate = index_bench.reembed_rate(reembed_sample)
        counts = {s["scale"]: s["episodes"] for s in scales}
        out["reembed"] = {**rate, "extrapolated": index_bench.extrapolate(rate, counts)}
    if bulk_episodes > 0:
        log(f"bulk load 0 -> {bulk_episodes} episodes with POST /search every 200 ms")
        work = Path(tempfile.mkdtemp(prefix="bulk-", dir=load.DATA))
        try:
            out["bulk_load"] = index_bench.bulk_load(work, bulk_episodes)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out


# -- the embedding backlog ---------------------------------------------------------------
def bench_drain(count: int, profile: bool = False) -> dict:
    """Drain rate of the worker against a fake Ollama, as a share of that server's own batch rate."""
    work = load.DATA / "run-drain"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    port = free_port()
    fake = subprocess.Popen([sys.executable, "-m", "tests.support.embedding_servers", "ollama", "--port", str(port),
                             "--dimension", str(load.DIMENSION)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    fake_url = f"http://{HOST}:{port}"
    gen = load.TextGenerator(seed=5)
    episodes = [{"userMessage": gen.sentence(6, 24), "aiResponse": gen.sentence(12, 48)} for _ in range(count)]
    try:
        with httpx.Client(timeout=30) as client:
            for _ in range(500):
                try:
                    client.post(fake_url + "/api/embed", json={"model": "m", "input": ["warm"]})
                    break
                except httpx.TransportError:
                    time.sleep(0.02)
            # The worker sends the same text the indexer builds (user + ai) in batches of 64.
            texts = [f"{e['userMessage']}\n{e['aiResponse']}" for e in episodes]
            started = time.perf_counter()
            sent = 0
            for start in range(0, len(texts), 64):
                client.post(fake_url + "/api/embed", json={"model": "nomic-embed-text", "input": texts[start:start + 64]})
                sent += len(texts[start:start + 64])
                if time.perf_counter() - started > 30:
                    break
            direct = sent / (time.perf_counter() - started)
        server = Server(work, {"EMBEDDER": "ollama", "OLLAMA_URL": fake_url})
        try:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                session = client.post("/sessions", json={"externalId": "drain"}).json()["id"]
                spy = None
                if profile:
                    spy = subprocess.Popen(
                        [str(VENV_BIN / "py-spy"), "record", "--pid", str(server.pid), "--duration", "5", "--rate",
                         "200", "--threads", "--format", "raw", "--nonblocking", "-o",
                         str(PROFILES / "drain.txt")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                started = time.perf_counter()
                cpu_before = cpu_seconds(server.pid)
                for start in range(0, count, 1000):
                    chunk = [{**e, "sessionId": session} for e in episodes[start:start + 1000]]
                    client.post("/episodes/batch", json={"episodes": chunk}).raise_for_status()
                posted = time.perf_counter() - started
                waited = server.wait_for_backlog(600)
                elapsed = time.perf_counter() - started
                server_cpu = cpu_seconds(server.pid) - cpu_before
                pending = server.health()["components"]["embeddingBacklog"]["pending"]
                if spy is not None:
                    spy.wait(timeout=60)
        finally:
            server.stop()
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    shutil.rmtree(work, ignore_errors=True)
    rate = count / elapsed
    extra = {"profile": summarise_profile(PROFILES / "drain.txt")} if profile else {}
    return {**extra, "episodes": count, "post_seconds": round(posted, 2), "drain_seconds": round(elapsed, 2),
            "waited_after_post_s": waited, "pending_at_end": pending, "drain_per_s": round(rate, 1),
            "embedder_direct_per_s": round(direct, 1), "ratio": round(rate / direct, 3),
            # CPU the server spent per episode (POST + worker + stored embedding + index write):
            # steadier than the rates on a shared machine.
            "server_cpu_ms_per_episode": round(1e3 * server_cpu / count, 3),
            "loadavg_1m_after": round(os.getloadavg()[0], 2)}


# -- the table -------------------------------------------------------------------------------------
CEILING_OF = {
    "GET /episodes/:id": "get_episode", "GET /sessions/:id/episodes": "session_episodes",
    "GET /episodes/search": "fts_query", "GET /episodes/search c1": "fts_query", "POST /episodes c1": "insert", "POST /episodes c8": "insert",
    "POST /episodes c32": "insert",
}


def hybrid_ceiling(c: dict) -> float:
    # POST /search embeds the query, runs a top-50 vector search and a top-50 OR keyword query,
    # then fetches the candidates by id: their raw costs in series (one thread).
    # SQLite-only stores have no Edge ceiling (their /search rows run the keyword leg alone).
    per_op_ms = sum(c[k]["mean_ms"] for k in ("hash_embed", "edge_search", "fts_recall_top50", "fetch_100_by_id") if k in c)
    return 1000.0 / per_op_ms


def table(record: dict) -> str:
    head = f"{'scale':>5} {'row':<31} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'ceiling/s':>10} {'ratio':>6} {'cpu ms/req':>10}"
    lines = [head, "-" * len(head)]
    for s in record["scales"]:
        c = s["ceiling"]
        for name, row in s["rows"].items():
            top = hybrid_ceiling(c) if name.startswith("POST /search") else c[CEILING_OF[name]]["ops_per_s"]
            row["ceiling_per_s"], row["ratio"] = round(top, 1), round(row["req_per_s"] / top, 3)
            lines.append(f"{s['scale']:>5} {name:<31} {row['req_per_s']:>9.1f} {row['p50_ms']:>8.2f} "
                         f"{row['p99_ms']:>8.2f} {row['errors']:>6} {top:>10.1f} {row['ratio']:>6.2f} "
                         f"{row['server_cpu_ms_per_req'] or 0:>10.3f}")
        for key, label in (("insert", "insert, 1 tx/row"), ("insert_with_outbox", "insert+outbox, 1 tx"),
                           ("fts_query", "FTS5 AND top 10"), ("fts_recall_top50", "FTS5 OR top 50"),
                           ("fts_recall_top50_no_budget", "FTS5 OR top 50, no budget"),
                           ("fetch_100_by_id", "fetch 100 by id"), ("edge_search", "Edge search top 50"),
                           ("hash_embed", "hash-embed a query")):
            if key not in c:
                continue
            r = c[key]
            lines.append(f"{s['scale']:>5} {'  raw ' + label:<31} {r['ops_per_s']:>9.1f} {r['p50_ms']:>8.3f} "
                         f"{r['p99_ms']:>8.3f} {'':>6} {'':>10} {'':>6}")
        mem = s["memory"]
        if s.get("sqlite_only"):
            lines.append(f"{s['scale']:>5}   SQLite-only: no vector index in this store (POST rows not run; /search = keyword leg only)")
        lines.append(f"{s['scale']:>5} {'  startup to 1st answer':<31} {s['startup_s']:>8.2f}s"
                     f"   (load average before this scale: {s['loadavg_1m_before']}, {os.cpu_count()} CPUs)")
        lines.append(f"{s['scale']:>5} {'  RSS idle / after rows':<31} {mem['idle']['rss_mb']:>7.0f}MB "
                     f"/ {mem['after_rows']['rss_mb']:.0f} MB (peak {mem['after_rows']['peak_rss_mb']:.0f} MB)")
        if "soak" in s:
            k = s["soak"]
            lines.append(f"{s['scale']:>5} {'  soak ' + str(k['seconds']) + ' s mixed c8':<31} {k['req_per_s']:>9.1f} "
                         f"{k['first']['p50_ms']:>8.2f} {k['first']['p99_ms']:>8.2f} {k['errors']:>6}   first minute;"
                         f" last: p50 {k['last']['p50_ms']:.2f} p99 {k['last']['p99_ms']:.2f} ms;"
                         f" RSS {k['rss_before']['rss_mb']:.0f} -> {k['rss_after']['rss_mb']:.0f} MB")
    if record.get("drain"):
        d = record["drain"]
        lines.append(f"{'-':>5} {'embedding backlog drain':<31} {d['drain_per_s']:>9.1f} {'':>8} {'':>8} "
                     f"{d['pending_at_end']:>6} {d['embedder_direct_per_s']:>10.1f} {d['ratio']:>6.2f}")
    if record.get("index"):
        lines += index_lines(record["index"])
    lines += check_lines(record)
    return "\n".join(lines)


def index_lines(index: dict) -> list[str]:
    lines = ["", "vector index"]
    reembed = index.get("reembed", {})
    for scale, r in index["rebuild_from_stored"].items():
        guess = reembed.get("extrapolated", {}).get(scale)
        instead = (f"; re-embedding with {reembed['model']} instead: ~{guess['reembed_seconds_extrapolated']:,.0f} s"
                   f" (extrapolated from {reembed['per_s']}/s on {reembed['sample']} texts)") if guess else ""
        lines.append(f"  rebuild {scale} ({r['points']:,} vectors) from stored embeddings, embedder down:"
                     f" {r['seconds']:,} s (load average {r.get('loadavg_1m_before')}){instead}")
    for scale, guess in reembed.get("extrapolated", {}).items():
        if scale not in index["rebuild_from_stored"]:
            lines.append(f"  re-embedding {scale} ({guess['episodes']:,}) with {reembed['model']}: ~"
                         f"{guess['reembed_seconds_extrapolated']:,.0f} s (extrapolated; no index built at this scale)")
    if "bulk_load" in index:
        b = index["bulk_load"]
        lines.append(f"  bulk load 0 -> {b['episodes']:,}: {b['samples']} POST /search samples, degraded by the index"
                     f" {b['degradedByIndex']} ({100 * b['degradedShare']:.2f} %; target 0), index builds {b['builds']},"
                     f" search p50/p99 {b['searchMsP50']}/{b['searchMsP99']} ms, load {b['loadSeconds']} s")
    return lines


def check_lines(record: dict) -> list[str]:
    """The scale targets, each against its figure in this run."""
    lines = ["", "scale targets"]
    for s in record["scales"]:
        rows = s["rows"]
        for name, what, target in (("GET /episodes/search", "keyword", "< 20 ms at 1m"),
                                   ("POST /search", "hybrid", "< 25 ms at 1m, HNSW built"),
                                   ("POST /search keyword leg only", "hybrid without its vector leg", "-")):
            if name in rows and f"{name} c1" in rows:
                lines.append(f"  {s['scale']:>5} {what} {name} p50 {rows[name + ' c1']['p50_ms']:.2f} ms at 1 connection,"
                             f" {rows[name]['p50_ms']:.2f} ms at 8 (target {target}; load average"
                             f" {rows[name + ' c1']['loadavg_1m_after']})")
        mem = s["memory"]
        lines.append(f"  {s['scale']:>5} RSS idle {mem['idle']['rss_mb']:.0f} MB, after the rows"
                     f" {mem['after_rows']['rss_mb']:.0f} MB")
        if "soak" in s:
            k = s["soak"]
            lines.append(f"  {s['scale']:>5} soak {k['seconds']} s: p50 last/first {k['p50_last_over_first']},"
                         f" RSS first->last segment {k['rss_growth_mb']:+.1f} MB")
    if record.get("drain"):
        d = record["drain"]
        lines.append(f"  drain {d['drain_per_s']}/s = {d['ratio']:.2f} x the embedder's own {d['embedder_direct_per_s']}/s"
                     f" (target >= 0.8)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark the memory service against its ceilings.")
    parser.add_argument("--scales", default="10k,100k", help="comma-separated, of 10k,100k,1m (1m is opt-in)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk row")
    parser.add_argument("--soak-seconds", type=int, default=300, help="mixed soak on --soak-scale (0: none)")
    parser.add_argument("--soak-scale", default=None, help="default: the largest scale run")
    parser.add_argument("--drain-episodes", type=int, default=10_000, help="0 skips the backlog-drain row")
    parser.add_argument("--profile", action="store_true", help="extra rows under py-spy (pip install py-spy)")
    parser.add_argument("--bulk-load", type=int, default=100_000,
                        help="episodes in the 0 -> N bulk load with /search sampled every 200 ms (0: skip)")
    parser.add_argument("--reembed-sample", type=int, default=512,
                        help="texts to time the default local embedder on, to extrapolate re-embedding (0: skip)")
    parser.add_argument("--sqlite-only", default="", help="scales run without a vector index (SQLite rows only)")
    parser.add_argument("--tag", default="", help="appended to the results file name")
    parser.add_argument("--no-keyword-budget", action="store_true",
                        help="serve with domain.keywords.MATCH_BUDGET off (rank every keyword match): the before")
    parser.add_argument("--stale-index", action="store_true",
                        help="a store whose index a migration asked to rebuild is served as it is (the scratch copy's"
                             " request dropped) instead of rebuilt first")
    parser.add_argument("--rows", default="", help="only the wrk rows whose name contains one of these (comma-separated)")
    parser.add_argument("--peer-rounds", type=int, default=2, help="rounds beside the Node.js original (0: none)")
    parser.add_argument("--key-check-requests", type=int, default=2000,
                        help="requests per route and key mode in bench/key_checks.py (0: none)")
    args = parser.parse_args()
    scales = [s.strip().lower() for s in args.scales.split(",") if s.strip()]
    args.sqlite_only = {s.strip().lower() for s in args.sqlite_only.split(",") if s.strip()}
    unknown = [s for s in scales if s not in load.SCALES]
    if unknown:
        parser.error(f"unknown scale(s) {unknown}; choose from {list(load.SCALES)}")
    args.soak_scale = args.soak_scale or max(scales, key=load.SCALES.get)
    wrk_binary = ensure_wrk()
    RESULTS.mkdir(parents=True, exist_ok=True)
    PROFILES.mkdir(parents=True, exist_ok=True)
    gen = load.TextGenerator()
    queries = gen.queries(QUERY_COUNT)
    with tempfile.TemporaryDirectory() as tmp:
        queries_file, words_file = Path(tmp) / "queries.txt", Path(tmp) / "words.txt"
        queries_file.write_text("\n".join(queries) + "\n")
        words_file.write_text("\n".join(gen.words[:3000]) + "\n")
        started = datetime.now(UTC)
        target = RESULTS / f"{started.strftime('%Y%m%dT%H%M%SZ')}{'-' + args.tag if args.tag else ''}.json"
        record = {
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "started": started.isoformat(timespec="seconds"),
            "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
            "settings": {"duration_s": args.duration, "wrk_threads": 1, "embedder": "hash", "dimension": load.DIMENSION,
                         "keyword_budget": None if args.no_keyword_budget else MATCH_BUDGET},
            "scales": [],
        }

        def save() -> None:  # after every phase: a long run that dies late keeps what it measured
            target.write_text(json.dumps(record, indent=2))

        for scale in scales:
            record["scales"].append(bench_scale(scale, wrk_binary, args, queries_file, words_file, queries))
            save()
    record["index"] = bench_index(record["scales"], args.reembed_sample, args.bulk_load)
    save()
    if args.drain_episodes > 0:
        log("embedding backlog drain against a fake Ollama server")
        record["drain"] = bench_drain(args.drain_episodes, args.profile)
        save()
    if args.key_check_requests > 0:
        import asyncio

        import key_checks

        log("the cost of key checks on the seed routes (bench/key_checks.py)")
        record["key_checks"], key_table = asyncio.run(key_checks.measure(args.key_check_requests, 3))
        log(key_table)
        save()
    if args.peer_rounds > 0:
        import peer  # imports this module's Server and Wrk, so only once main() runs

        record["peer"] = peer.peer_comparison(argparse.Namespace(duration=args.duration, rounds=args.peer_rounds),
                                              wrk_binary)
    text = table(record)
    if record.get("peer"):
        text += "\n\n" + record["peer"].pop("table")
    print(text)
    record["table"] = text
    save()
    print(f"\nwritten to {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
