"""How many writes made during maintenance builds the catch-up replays (round-4 helper 10q).

A real service (Qdrant Edge, hash embedder, SQLite) takes a bulk load through the API while its
maintenance builds run; at the end /health's ``catchUp`` says how many writes were made during
builds and how many the catch-ups replayed. Before this round every one of them was replayed.

    .venv/bin/python docs/notes/round-4/10q_catchup.py --episodes 20000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.support.process import wait_for_index  # noqa: E402
from tests.support.server import ServiceProcess, service_env  # noqa: E402


def cpu_ms(pid: int) -> float:
    """User+system CPU of the process and its children that were waited for, in ms (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(v) for v in fields[11:15])
    return 1000.0 * ticks / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="catchup-"))
    env = service_env(folder / "memory.db", {"EMBEDDING_DIM": "384", "INDEX_CHECK_SECONDS": "0.5",
                                             "INDEX_INLINE_BUILD_POINTS": "2000", "INDEX_OPTIMIZE_EVERY": "2000"})
    with ServiceProcess(env, log_dir=folder) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        sid = http.post("/sessions", json={"externalId": "bulk"}).json()["id"]
        start, cpu0, samples = time.monotonic(), cpu_ms(server.pid), []
        for first in range(0, args.episodes, args.batch):
            body = {"episodes": [{"sessionId": sid, "userMessage": f"kiwi note {n} {n % 97}", "aiResponse": "ok"}
                                 for n in range(first, min(first + args.batch, args.episodes))]}
            assert http.post("/episodes/batch", json=body).status_code == 201
            if first % (args.batch * 20) == 0:
                index = http.get("/health").json()["components"]["vectorIndex"].get("index") or {}
                progress = (index.get("collections", {}).get("episodes") or {}).get("progress")
                if progress:
                    samples.append(progress["text"])
        final = wait_for_index(server.url, timeout=1800)["components"]["vectorIndex"]["index"]
        result = {"episodes": args.episodes, "seconds": round(time.monotonic() - start, 1),
                  "server_cpu_ms": round(cpu_ms(server.pid) - cpu0), "load_average": os.getloadavg(),
                  "builds": final["builds"], "catchUp": final["catchUp"],
                  "points": final["collections"]["episodes"]["points"], "rows": final["collections"]["episodes"]["rows"],
                  "progress_seen": samples[-8:]}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
