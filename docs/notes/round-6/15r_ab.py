"""POST /episodes c32 and keyword search c1 on the peer bench's corpus, trees alternating, CPU per
request split by process (HTTP process vs the index host, which the POST's embedding costs).

    .venv/bin/python docs/notes/round-6/15r_ab.py [--tree LABEL=DIR ...] [--rows post,search1] [--seconds 5]
        [--rounds 3] [--spy DIR]

Each tree runs from its own copy of the same store (filled once through the API with the peer
bench's corpus, 100 sessions x 200 episodes, kept in bench/data/15r-corpus), with PYTHONPATH set to
the tree (this tree when no --tree is given). POST rows wait for the backlog to drain, so the
host's embedding, upserts and outbox transactions of those POSTs are inside the CPU figure.
--threads: CPU per thread as well. --spy DIR: py-spy (raw, 200 Hz, --threads) of both processes during each row, written there.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
import load  # noqa: E402
from peer import SESSIONS, PER_SESSION, corpus, fill_project, wait_for_index_builds  # noqa: E402
from run import VENV_BIN, Server, Wrk, ensure_wrk, log  # noqa: E402

CORPUS = load.DATA / "15r-corpus"
ROWS = {"post": ("post_episode.lua", 32), "search1": ("keyword_search.lua", 1), "search8": ("keyword_search.lua", 8),
        "id": ("get_episode.lua", 32), "page": ("session_episodes.lua", 32)}


def cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_names(pid: int) -> dict[int, str]:
    """tid -> Python thread name (py-spy dump); threads it does not name count as "other"."""
    out = subprocess.run([str(VENV_BIN / "py-spy"), "dump", "--pid", str(pid)], capture_output=True, text=True).stdout
    return {int(m.group(1)): m.group(2) for m in re.finditer(r'^Thread (\d+) \(\w+\): "(.*)"', out, re.M)}


def thread_cpu(pid: int, names: dict[int, str]) -> dict[str, float]:
    spent: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = re.sub(r"_\d+$", "", names.get(int(task.name), "other"))  # reader/pool threads summed
        spent[name] = spent.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return spent


def embed_calls(url: str) -> float:
    """The worker's embed calls so far (one per chunk of a pass: passes that embedded anything)."""
    import httpx
    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("memory_embed_calls_total"))


def host_of(pid: int) -> int | None:
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if Path(f"/proc/{child}/comm").read_text().strip() == "memory-index":
                return int(child)
    return None


def ensure_corpus() -> None:
    if (CORPUS / "memory.db").is_file():
        return
    CORPUS.mkdir(parents=True, exist_ok=True)
    server = Server(CORPUS, {"PYTHONPATH": str(ROOT)})
    try:
        fill_project(server.url, corpus())
        server.wait_for_backlog(300)
        wait_for_index_builds(server, 600)
    finally:
        server.stop()


def copy_store(dest: Path) -> None:
    for item in CORPUS.iterdir():
        if item.name.endswith((".sock", ".log")) or item.name.startswith("memory.db.owner"):
            continue
        if item.is_dir():
            shutil.copytree(item, dest / item.name)
        else:
            shutil.copy2(item, dest / item.name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", action="append", default=[])
    parser.add_argument("--rows", default="post,search1")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spy", type=Path, default=None)
    parser.add_argument("--perf", type=Path, default=None, help="perf record -g of both processes, here")
    parser.add_argument("--threads", action="store_true", help="also CPU per thread (named by py-spy dump)")
    args = parser.parse_args()
    trees = [t.split("=", 1) for t in args.tree] or [["this", str(ROOT)]]
    ensure_corpus()
    work = Path(tempfile.mkdtemp(prefix="15r-ab-", dir=load.DATA))
    gen = load.TextGenerator(seed=16)
    (work / "queries.txt").write_text("\n".join(gen.queries(2_000)) + "\n")
    (work / "words.txt").write_text("\n".join(gen.words[:3000]) + "\n")
    wrk = Wrk(ensure_wrk(), {"BENCH_MAX_ID": str(SESSIONS * PER_SESSION), "BENCH_SESSIONS": str(SESSIONS),
                             "BENCH_QUERIES": str(work / "queries.txt"), "BENCH_WORDS": str(work / "words.txt")})
    servers = {}
    try:
        for label, tree in trees:
            (work / label).mkdir()
            copy_store(work / label)
            servers[label] = Server(work / label, {"PYTHONPATH": str(Path(tree).resolve())})
            wait_for_index_builds(servers[label], 300)
            wrk.run(servers[label].url, "get_episode.lua", 8, 2)
        for r in range(args.rounds):
            order = trees if r % 2 == 0 else trees[::-1]
            for row in args.rows.split(","):
                script, conns = ROWS[row]
                for label, _ in order:
                    server = servers[label]
                    host = host_of(server.pid)
                    pids = {"http": server.pid, **({"host": host} if host else {})}
                    spies = []
                    if args.spy:
                        args.spy.mkdir(parents=True, exist_ok=True)
                        for name, pid in pids.items():
                            spies.append(subprocess.Popen(
                                [str(VENV_BIN / "py-spy"), "record", "--pid", str(pid), "--duration",
                                 str(max(1, round(args.seconds))), "--rate", "200", "--threads", "--format", "raw",
                                 "--nonblocking", "-o", str(args.spy / f"{label}-{row}-{name}-r{r}.txt")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                    names = {k: thread_names(p) for k, p in pids.items()} if args.threads else {}
                    threads_before = {k: thread_cpu(pids[k], n) for k, n in names.items()}
                    if args.perf:
                        args.perf.mkdir(parents=True, exist_ok=True)
                        for name, pid in pids.items():
                            spies.append(subprocess.Popen(
                                ["perf", "record", "-F", "1999", "-g", "-p", str(pid), "-o",
                                 str(args.perf / f"{label}-{row}-{name}-r{r}.data"), "--", "sleep", str(args.seconds)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                    calls = embed_calls(server.url) if row == "post" else 0.0
                    before = {k: cpu(p) for k, p in pids.items()}
                    res = wrk.run(server.url, script, conns, args.seconds)
                    if row == "post":
                        server.wait_for_backlog(120)
                    spent = {k: cpu(p) - before[k] for k, p in pids.items()}
                    threads_after = {k: thread_cpu(pids[k], n) for k, n in names.items()}
                    for spy in spies:
                        spy.wait(timeout=60)
                    n = res["requests"]
                    if row == "post":
                        passes = embed_calls(server.url) - calls
                        print(f"    {passes:.0f} embedding passes, {n / max(passes, 1):.1f} POSTs per pass", flush=True)
                    parts = " ".join(f"{k} {1e3 * v / n:.3f}" for k, v in spent.items())
                    print(f"round {r} {row:8} {label:10} {res['req_per_s']:8.0f} req/s p50 {res['p50_ms']:7.3f} "
                          f"p99 {res['p99_ms']:7.2f} ms  CPU ms/req {1e3 * sum(spent.values()) / n:.3f} ({parts}) "
                          f"err {res['errors']} load {os.getloadavg()[0]:.2f}", flush=True)
                    for k, after in threads_after.items():
                        split = {t: after[t] - threads_before[k].get(t, 0.0) for t in after}
                        print(f"    {k} threads ms/req: " + " ".join(
                            f"{t} {1e3 * v / n:.3f}" for t, v in sorted(split.items(), key=lambda kv: -kv[1]) if v > 0),
                            flush=True)
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
