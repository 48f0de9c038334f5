"""One model copy: memory and hybrid-search latency with the default in-process model.

Starts ``memory-service serve`` (EMBEDDER=local, all-MiniLM-L6-v2 in numpy) on a fresh small store
(``WORKERS``: 1, the embedded default's only value), writes ``--episodes`` episodes, waits until they are embedded,
and any index build has finished, then times ``--searches`` hybrid ``POST /search`` one at a time
(1 connection) and reads the resident memory of the whole process tree (RSS summed per process,
split into anonymous and file-backed pages, and PSS, which shares pages out fairly) right after
them (``memory``) and once the service has been quiet for longer than it takes to give freed
memory back (``memory_quiet``, ``app.heap.TRIM_SECONDS`` + 5 s). ``--busy``
then writes that many longer episodes at once and times the same searches while the embedding
worker drains that backlog in the same process.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/one_model.py --workers 1
    # the code of another tree (e.g. main, unpacked with git archive) with this venv:
    HF_HUB_OFFLINE=1 PYTHONPATH=/tmp/main-tree .venv/bin/python bench/one_model.py --workers 1

One JSON line per run. Keep runs short on a shared machine and say its load (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import heap  # noqa: E402
from tests.support.process import wait_for_backlog, wait_for_index  # noqa: E402
from tests.support.process_tree import tree  # noqa: E402
from tests.support.server import ServiceProcess, service_env  # noqa: E402

WORDS = ("harbour boat kitten budget launch lisbon cello ramen deploy friday meeting tuesday garden "
         "river mountain coffee invoice spark rocket piano").split()


def memory(root: int) -> dict:
    """RSS split into anonymous memory (heaps, the model's arrays) and file-backed pages (shared
    libraries, and the memory-mapped SQLite file and Qdrant segments, which grow with the data)."""
    kib = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0, "Threads": 0, "Pss": 0}
    count = 0
    for pid in tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        count += 1
        for line in (status + rollup).splitlines():
            name, _, value = line.partition(":")
            if name in kib:
                kib[name] += int(value.split()[0])
    mb = {name: round(value / 1024, 1) for name, value in kib.items()}
    return {"rss_mb": mb["VmRSS"], "anon_mb": mb["RssAnon"], "file_mb": mb["RssFile"], "pss_mb": mb["Pss"],
            "processes": count, "threads": kib["Threads"], "largest": largest_mappings(root)}


def largest_mappings(root: int, top: int = 8) -> dict[str, float]:
    """Resident MB by what is mapped (a file's name, or ``[anon]``, ``[heap]``), the largest
    first: where the RSS goes, so a change aimed at one part can be read off one run."""
    kib: dict[str, int] = {}
    for pid in tree(root):
        try:
            lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
        except OSError:
            continue
        name = "[anon]"
        for line in lines:
            first = line.split(None, 5)
            if len(first) >= 5 and "-" in first[0] and not first[0].endswith(":"):
                name = Path(first[5]).name if len(first) == 6 and first[5].startswith("/") else (
                    first[5] if len(first) == 6 else "[anon]")
            elif first and first[0] == "Rss:":
                kib[name] = kib.get(name, 0) + int(first[1])
    ordered = sorted(kib.items(), key=lambda item: -item[1])[:top]
    return {name: round(value / 1024, 1) for name, value in ordered}


def text(i: int, words: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(words)) + f" note {i}"


def timed_searches(client: httpx.Client, count: int) -> dict:
    seconds, degraded = [], 0
    for i in range(count):
        started = time.perf_counter()
        body = client.post("/search", json={"query": f"{WORDS[i % len(WORDS)]} {WORDS[(i * 5) % len(WORDS)]}",
                                            "limit": 10}).json()
        seconds.append(time.perf_counter() - started)
        degraded += bool(body["degraded"])
    seconds.sort()
    return {"p50_ms": round(statistics.median(seconds) * 1000, 2),
            "p90_ms": round(seconds[int(len(seconds) * 0.9)] * 1000, 2),
            "max_ms": round(seconds[-1] * 1000, 2), "degraded": degraded}


def pending(client: httpx.Client) -> int:
    return client.get("/health").json()["components"]["embeddingBacklog"]["pending"]


def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="one-model-") as tmp:
        env = service_env(Path(tmp) / "memory.db", {"WORKERS": str(args.workers), "LOG_LEVEL": "warning"})
        for variable in ("EMBEDDER", "EMBEDDING_DIM", "EMBEDDING_MODEL"):
            env.pop(variable, None)
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        with ServiceProcess(env, log_dir=tmp) as server, httpx.Client(base_url=server.url, timeout=60.0) as client:
            session = client.post("/sessions", json={"externalId": "bench"}).json()["id"]
            for i in range(args.episodes):
                client.post("/episodes", json={"sessionId": session, "userMessage": text(i, 12), "aiResponse": "ok"})
            wait_for_backlog(server.url, pending=0, timeout=1800)
            # Idle means no index build either: a build runs in a child process of its own, which
            # would be counted with the service until its graph is built.
            wait_for_index(server.url, timeout=1800)
            deadline = time.monotonic() + 600  # and the build child has exited
            while len(tree(server.pid)) > 1 and time.monotonic() < deadline:
                time.sleep(0.5)
            if len(tree(server.pid)) > 1:
                raise SystemExit("the index build child still runs after 600 s: no idle reading to take")
            timed_searches(client, 20)  # warm: every worker process has answered some
            idle = timed_searches(client, args.searches)
            searched = memory(server.pid)
            # A quiet service gives what it freed back to the system within heap.TRIM_SECONDS.
            time.sleep(heap.TRIM_SECONDS + 5)
            result = {"workers": args.workers, "pythonpath": os.environ.get("PYTHONPATH", ""),
                      "episodes": args.episodes, "idle": idle, "memory": searched,
                      "memory_quiet": memory(server.pid), "load": os.getloadavg()[0]}
            if args.busy:
                def write() -> None:
                    with httpx.Client(base_url=server.url, timeout=60.0) as writer:
                        for i in range(args.busy):
                            writer.post("/episodes", json={"sessionId": session, "userMessage": text(i, 120),
                                                           "aiResponse": text(i + 1, 60)})
                writer = threading.Thread(target=write)
                writer.start()
                while pending(client) < min(args.busy, 64):  # the worker has a backlog to chew on
                    time.sleep(0.05)
                before = pending(client)
                busy = timed_searches(client, args.searches)
                busy["pending_before"], busy["pending_after"] = before, pending(client)
                writer.join()
                result["busy"] = busy
            server.stop()
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--busy", type=int, default=0, help="episodes written at once before the busy searches")
    print(json.dumps(run(parser.parse_args())), flush=True)


if __name__ == "__main__":
    main()
