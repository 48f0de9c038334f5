"""The keyword budget at scale: the service's own keyword adapter, with and without the budget.

For each store and each of the bench's queries (``load.TextGenerator().queries``, the queries
``make bench`` sends), in-process and single-threaded through ``SqliteKeywordIndex.search``:

- hybrid ``/search``'s keyword leg (``recall_query``: stop-words dropped, any term, depth 50) and
  the keyword route ``GET /episodes/search`` (``plain_query``, all terms, limit 10);
- each with ``domain.keywords.MATCH_BUDGET`` (after) and without a budget (before): CPU ms per
  search (``time.thread_time`` of the reading thread is not reachable, so the process's CPU time:
  the loop and the reader thread; nothing else runs), p50/p99/mean and wall p50;
- how many searches the rule bounded (terms left out / cut to the newest matches), and how much
  of the unbounded top 10 and top 50 the bounded search still returns (its cost in recall).

    python bench/keyword_budget.py 100k 300k 1m --queries 300 --json bench/results/keyword-budget.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.sqlite import keyword_index  # noqa: E402
from adapters.sqlite.store import SqliteStore  # noqa: E402
from domain.keywords import MATCH_BUDGET, plain_query, recall_query, within_budget  # noqa: E402

import load  # noqa: E402  (bench/, beside this file)

LEGS = {"hybrid keyword leg (any, top 50)": (recall_query, 50), "GET /episodes/search (all, top 10)": (plain_query, 10)}


def _summary(values: list[float]) -> dict:
    ordered = sorted(values)
    pick = lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)  # noqa: E731
    return {"p50": pick(0.5), "p99": pick(0.99), "mean": round(statistics.fmean(ordered), 3), "max": round(ordered[-1], 3)}


async def _measure(store: SqliteStore, queries: list[str], make, depth: int, budget: int | None) -> tuple[dict, list]:
    cpu, wall, found = [], [], []
    for text in queries:
        query = replace(make(text), budget=budget)
        c0, w0 = time.process_time(), time.perf_counter()
        hits = await store.keywords.search("episodes", query, depth)
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
        found.append([h.item.id for h in hits])
    return {"cpu_ms": _summary(cpu), "wall_ms_p50": _summary(wall)["p50"]}, found


async def bench_store(scale: str, queries: list[str]) -> dict:
    store = SqliteStore.open(str(load.scale_dir(scale) / "memory.db"))
    plans = {"searches": 0, "dropped": 0, "newest": 0}

    def counting(query, counts, scoped=False):
        plan = within_budget(query, counts, scoped)
        if query.budget is not None:
            plans["searches"] += 1
            plans["dropped"] += bool(plan.dropped)
            plans["newest"] += plan.newest is not None
        return plan

    keyword_index.within_budget = counting
    out: dict = {"scale": scale, "queries": len(queries), "budget": MATCH_BUDGET, "loadavg_1m_before": os.getloadavg()[0]}
    try:
        for name, (make, depth) in LEGS.items():
            await _measure(store, queries[:20], make, depth, None)  # warm the page cache
            plans.update(searches=0, dropped=0, newest=0)
            after, bounded = await _measure(store, queries, make, depth, MATCH_BUDGET)
            before, full = await _measure(store, queries, make, depth, None)
            kept = {k: statistics.fmean(len(set(b[:k]) & set(f[:k])) / len(f[:k]) for b, f in zip(bounded, full) if f)
                    for k in (10, depth)}
            out[name] = {"before": before, "after": after, "bounded": dict(plans),
                         "unbounded_top_kept": {f"top{k}": round(v, 3) for k, v in kept.items()}}
            print(f"[{scale}] {name}: CPU p50 {before['cpu_ms']['p50']} -> {after['cpu_ms']['p50']} ms,"
                  f" p99 {before['cpu_ms']['p99']} -> {after['cpu_ms']['p99']} ms; bounded {plans};"
                  f" kept {out[name]['unbounded_top_kept']}", flush=True)
    finally:
        keyword_index.within_budget = within_budget
        await store.close()
    out["loadavg_1m_after"] = os.getloadavg()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scales", nargs="+", choices=list(load.SCALES))
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    queries = load.TextGenerator().queries(2_000)[: args.queries]
    results = [asyncio.run(bench_store(scale, queries)) for scale in args.scales]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
