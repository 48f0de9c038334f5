"""Would a lower CPU priority for the index host help the request path without starving the drain?

    .venv/bin/python docs/notes/round-5/ix_nice.py [--rounds 2] [--nice 10]

One server (this tree) on a scratch copy of the 10k store; per round and per niceness of the
host (0, then --nice, set on every thread of the host from outside): (a) POST /episodes at 32
connections for 6 s, then the seconds until the backlog is empty (drain rate = jobs / seconds);
(b) mixed.lua at 256 connections for 6 s with /health polled every 20 ms (p50/p99/max)."""
import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
import load  # noqa: E402
from run import Server, Wrk, ensure_wrk, log  # noqa: E402


def host_of(pid: int) -> int:
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if Path(f"/proc/{child}/comm").read_text().strip() == "memory-index":
                return int(child)
    raise RuntimeError("no index host")


def renice(pid: int, value: int) -> None:
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.setpriority(os.PRIO_PROCESS, int(task.name), value)


def pending(url: str) -> int:
    return httpx.get(url + "/health", timeout=10).json()["components"]["embeddingBacklog"]["pending"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--nice", type=int, default=10)
    args = parser.parse_args()
    manifest = load.ensure_store("10k", log)
    tmp = Path(tempfile.mkdtemp(prefix="ix-nice-"))
    gen = load.TextGenerator()
    (tmp / "q.txt").write_text("\n".join(gen.queries(2000)) + "\n")
    (tmp / "w.txt").write_text("\n".join(gen.words[:3000]) + "\n")
    wrk = Wrk(ensure_wrk(), {"BENCH_MAX_ID": str(manifest["episodes"]), "BENCH_SESSIONS": str(manifest["sessions"]),
                             "BENCH_QUERIES": str(tmp / "q.txt"), "BENCH_WORDS": str(tmp / "w.txt")})
    server = Server(load.scratch_copy("10k"), {"MAX_IN_FLIGHT": "32"}, probe_path="/episodes/1")
    try:
        server.wait_for_backlog(120)
        host = host_of(server.pid)
        for _ in range(args.rounds):
            for value in (0, args.nice):
                renice(host, value)
                post = wrk.run(server.url, "post_episode.lua", 32, 6)
                jobs, started = pending(server.url), time.perf_counter()
                while pending(server.url) > 0 and time.perf_counter() - started < 120:
                    time.sleep(0.05)
                drain = time.perf_counter() - started
                samples, stop = [], threading.Event()

                def probe() -> None:
                    with httpx.Client(timeout=30) as client:
                        while not stop.is_set():
                            t0 = time.perf_counter()
                            client.get(server.url + "/health")
                            samples.append(time.perf_counter() - t0)
                            stop.wait(0.02)
                thread = threading.Thread(target=probe)
                thread.start()
                mixed = wrk.run(server.url, "mixed.lua", 256, 6)
                stop.set()
                thread.join()
                server.wait_for_backlog(120)
                s = sorted(samples)
                print({"nice": value, "post_req_per_s": post["req_per_s"], "backlog_after_post": jobs,
                       "drain_s": round(drain, 2), "drain_jobs_per_s": round(jobs / drain, 1) if drain else None,
                       "mixed_req_per_s": mixed["req_per_s"],
                       "health_p50_p99_max_ms": [round(1e3 * s[len(s) // 2], 1), round(1e3 * s[int(0.99 * len(s))], 1),
                                                 round(1e3 * s[-1], 1)], "health_n": len(s),
                       "load": round(os.getloadavg()[0], 2)}, flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
