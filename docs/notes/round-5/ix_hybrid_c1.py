"""Hybrid POST /search at 1 connection: this tree (the vector leg crosses the index host's socket)
against a baseline tree (the index in the serving process), alternating, on the 10k bench store.

    .venv/bin/python docs/notes/round-5/ix_hybrid_c1.py BASELINE_TREE [--rounds 2] [--seconds 5]"""
import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
import load  # noqa: E402
from run import Server, Wrk, ensure_wrk, log  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("baseline")
parser.add_argument("--rounds", type=int, default=2)
parser.add_argument("--seconds", type=float, default=5)
args = parser.parse_args()
manifest = load.ensure_store("10k", log)
tmp = Path(tempfile.mkdtemp(prefix="ix-c1-"))
(tmp / "q.txt").write_text("\n".join(load.TextGenerator().queries(2000)) + "\n")
wrk = Wrk(ensure_wrk(), {"BENCH_MAX_ID": str(manifest["episodes"]), "BENCH_SESSIONS": str(manifest["sessions"]),
                         "BENCH_QUERIES": str(tmp / "q.txt")})
servers = {"this tree": Server(load.scratch_copy("10k"), {}, probe_path="/episodes/1")}
try:
    from hardening import _second_copy  # noqa: E402

    servers["baseline"] = Server(_second_copy("10k", 1), {"PYTHONPATH": str(Path(args.baseline).resolve())},
                                 probe_path="/episodes/1")
    for server in servers.values():
        server.wait_for_backlog(120)
        wrk.run(server.url, "hybrid_search.lua", 1, 2)  # warm up
    for _ in range(args.rounds):
        for label, server in servers.items():
            r = wrk.run(server.url, "hybrid_search.lua", 1, args.seconds, server.pid)
            print({"code": label, "req_per_s": r["req_per_s"], "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"],
                   "cpu_ms_per_req_tree": r["server_cpu_ms_per_req"], "errors": r["errors"],
                   "load": r["loadavg_1m_after"]}, flush=True)
finally:
    for server in servers.values():
        server.stop()
