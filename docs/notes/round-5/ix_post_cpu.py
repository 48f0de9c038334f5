"""CPU ms per POST /episodes, split by process: the HTTP process vs the index host (this tree)
against the old single process (a baseline tree), on scratch copies of the 10k bench store.

    .venv/bin/python docs/notes/round-5/ix_post_cpu.py BASELINE_TREE [--seconds 8] [--connections 32] [--rounds 2]

The POST load runs until the backlog is drained, so the embedding and upserts it caused are in
the figures (the CPU counted is from the start of wrk to the empty backlog)."""
import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
import load  # noqa: E402
from run import Server, Wrk, ensure_wrk, log  # noqa: E402


def cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def measure(label: str, server: Server, wrk: Wrk, args) -> dict:
    pids = {server.pid: "http"} | {c: "index host" for c in children(server.pid)
                                     if Path(f"/proc/{c}/comm").read_text().strip() == "memory-index"}
    before = {p: cpu(p) for p in pids}
    result = wrk.run(server.url, "post_episode.lua", args.connections, args.seconds)
    server.wait_for_backlog(120)
    spent = {pids[p]: cpu(p) - before[p] for p in pids}
    row = {"code": label, "req_per_s": result["req_per_s"], "requests": result["requests"],
           **{f"{k} cpu ms/req": round(1e3 * v / result["requests"], 3) for k, v in spent.items()},
           "errors": result["error_detail"], "load": round(os.getloadavg()[0], 2)}
    print(row, flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("baseline")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    manifest = load.ensure_store("10k", log)
    words = Path(tempfile.mkdtemp(prefix="ix-post-")) / "words.txt"
    words.write_text("\n".join(load.TextGenerator().words[:3000]) + "\n")
    wrk = Wrk(ensure_wrk(), {"BENCH_MAX_ID": str(manifest["episodes"]), "BENCH_SESSIONS": str(manifest["sessions"]),
                             "BENCH_WORDS": str(words)})
    for _ in range(args.rounds):
        for label, env in (("this tree", {}), ("baseline", {"PYTHONPATH": str(Path(args.baseline).resolve())})):
            server = Server(load.scratch_copy("10k"), env, probe_path="/episodes/1")
            try:
                server.wait_for_backlog(120)
                measure(label, server, wrk, args)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
