"""Calibrating the relevance scale and floor (``domain.relevance``) on LoCoMo conversations.

Every question is searched with ``minScore`` 0 (nothing dropped) through the same code path as
``memory-service eval``; each returned hit is marked evidence or not, and each question is also searched in the other
conversations, where nothing answers it (off-topic). Printed: the cosine
percentiles of evidence and non-evidence vector hits (where ``UNRELATED_COSINE`` and
``CLOSE_COSINE`` come from), and for each candidate floor the recall@10 kept and the share of
evidence and of non-evidence hits it drops, per conversation.

    python bench/relevance_floor.py --embedder local --data ../../shared/eval/locomo-dev
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import evaluation  # noqa: E402
from app.config import Settings  # noqa: E402
from domain.eval_metrics import recall  # noqa: E402
from domain.retrieval import SearchQuery  # noqa: E402

FLOORS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


async def collect(settings: Settings, files: list[Path], ranker: str | None, k: int) -> list[dict]:
    rows = []
    conversations = [evaluation.read_conversation(f) for f in files]
    async with evaluation.prepared(settings, conversations) as ready:
        search = ready.container.search()
        for item in ready.loaded:
            for question in item.conversation.questions:
                result = await search.search(SearchQuery(question.text, limit=k, session_id=item.session_id,
                                                         ranker=ranker, min_score=0.0))
                hits = [{"turns": h.item.metadata.get("turnIds", []), "relevance": h.relevance,
                         "cosine": h.vector.score if h.vector else None} for h in result.hits]
                for h in hits:
                    h["evidence"] = bool(set(h["turns"]) & set(question.evidence))
                rows.append({"conversation": item.conversation.name, "evidence": question.evidence, "hits": hits})
                # The same question in another conversation: nothing there answers it.
                for other in ready.loaded:
                    if other is item:
                        continue
                    result = await search.search(SearchQuery(question.text, limit=k, session_id=other.session_id,
                                                             ranker=ranker, min_score=0.0))
                    rows.append({"conversation": "off-topic", "evidence": (), "hits": [
                        {"turns": [], "relevance": h.relevance, "cosine": h.vector.score if h.vector else None,
                         "evidence": False} for h in result.hits]})
    return rows


def percentiles(values: list[float]) -> str:
    if len(values) < 10:
        return "n/a"
    q = statistics.quantiles(values, n=10)
    return f"p10 {q[0]:.2f} p50 {q[4]:.2f} p90 {q[8]:.2f} (n={len(values)})"


def report(everything: list[dict], k: int) -> None:
    rows = [r for r in everything if r["conversation"] != "off-topic"]
    off = [h for r in everything if r["conversation"] == "off-topic" for h in r["hits"]]
    print("cosine of off-topic hits:   ", percentiles([h["cosine"] for h in off if h["cosine"] is not None]))
    print("relevance of off-topic hits:", percentiles([h["relevance"] for h in off]))
    hits = [h for r in rows for h in r["hits"]]
    print("cosine of evidence hits:    ", percentiles([h["cosine"] for h in hits if h["evidence"] and h["cosine"] is not None]))
    print("cosine of non-evidence hits:", percentiles([h["cosine"] for h in hits if not h["evidence"] and h["cosine"] is not None]))
    print("relevance of evidence:      ", percentiles([h["relevance"] for h in hits if h["evidence"]]))
    print("relevance of non-evidence:  ", percentiles([h["relevance"] for h in hits if not h["evidence"]]))
    names = sorted({r["conversation"] for r in rows})
    print(f"{'floor':>6} {'R@' + str(k):>7} " + " ".join(f"{n:>8}" for n in names) + "  evidence dropped  other dropped  off-topic kept")
    for floor in FLOORS:
        def kept(r):
            return [h["turns"] for h in r["hits"] if floor == 0 or (h["relevance"] >= floor and h["relevance"] > 0)]
        overall = statistics.fmean(recall(r["evidence"], kept(r), k) for r in rows)
        per = [statistics.fmean(recall(r["evidence"], kept(r), k) for r in rows if r["conversation"] == n) for n in names]
        ev = [h for h in hits if h["evidence"]]
        other = [h for h in hits if not h["evidence"]]
        drop = lambda hs: sum(1 for h in hs if not (floor == 0 or (h["relevance"] >= floor and h["relevance"] > 0))) / max(1, len(hs))
        print(f"{floor:>6.2f} {overall:>7.3f} " + " ".join(f"{p:>8.3f}" for p in per)
              + f"  {drop(ev):>16.3f}  {drop(other):>13.3f}  {1 - drop(off):>14.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="a folder of .json/.jsonl files, or one file")
    parser.add_argument("--embedder", default="hash", choices=["hash", "local"])
    parser.add_argument("--ranker", default=None)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    files = sorted(args.data.glob("*.json*")) if args.data.is_dir() else [args.data]
    settings = Settings(sqlite_path=":memory:", vector_index="memory", embedder=args.embedder,
                        embedding_dim=384 if args.embedder == "local" else 768, worker_batch=128)
    report(asyncio.run(collect(settings, files, args.ranker, args.k)), args.k)


if __name__ == "__main__":
    main()
