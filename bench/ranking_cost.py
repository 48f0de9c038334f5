"""CPU per search by ranker: what a ranker adds to a ``/search`` request on a real store.

Loads the LoCoMo dev conversations into a throwaway SQLite + Edge store (the eval code path), then
runs every question through ``SearchService.search`` with each ranker, several rounds, and reports
this process's CPU time per search (embedding the query, both legs, loading candidates and
neighbours, ranking). The HTTP layer is left out: it costs the same whichever ranker runs.

    python bench/ranking_cost.py --embedder hash --rankers weighted,conversation
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.config import Settings  # noqa: E402
from app.evaluation import prepared, read_conversation  # noqa: E402
from domain.retrieval import SearchQuery  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "locomo-dev"


async def measure(settings: Settings, files: list[Path], rankers: list[str], rounds: int) -> dict[str, float]:
    conversations = [read_conversation(f) for f in files]
    async with prepared(settings, conversations) as ready:
        search = ready.container.search()  # type: ignore[attr-defined]
        queries = [SearchQuery(q.text, limit=10, session_id=item.session_id)
                   for item in ready.loaded for q in item.conversation.questions]
        for ranker in rankers:  # warm caches and the model once per ranker
            for q in queries[:20]:
                await search.search(SearchQuery(q.query, q.limit, q.session_id, ranker=ranker))
        cpu = dict.fromkeys(rankers, 0.0)
        for _ in range(rounds):
            for ranker in rankers:  # interleaved, so background load falls on every ranker alike
                started = time.process_time()
                for q in queries:
                    await search.search(SearchQuery(q.query, q.limit, q.session_id, ranker=ranker))
                cpu[ranker] += time.process_time() - started
        return {ranker: 1e3 * seconds / (rounds * len(queries)) for ranker, seconds in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", default="hash", choices=["hash", "local"])
    parser.add_argument("--index", default="edge", choices=["edge", "memory"])
    parser.add_argument("--rankers", default="weighted,conversation")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    dim = 384 if args.embedder == "local" else 768
    settings = Settings(sqlite_path=":memory:", vector_index=args.index, embedder=args.embedder,
                        embedding_model="all-MiniLM-L6-v2", embedding_dim=dim, worker_batch=128)
    files = sorted(args.data.glob("*.json"))
    rankers = args.rankers.split(",")
    result = asyncio.run(measure(settings, files, rankers, args.rounds))
    base = result[rankers[0]]
    print(f"CPU per search ({args.embedder} embedder, {args.index} index, {args.rounds} rounds):")
    for ranker, ms in result.items():
        print(f"  {ranker:<14} {ms:7.2f} ms   x{ms / base:.2f} of {rankers[0]}")


if __name__ == "__main__":
    main()
