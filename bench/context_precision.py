"""``/context`` precision on LoCoMo conversations: the share of the episodes a package keeps that
hold evidence for the question, at several token budgets.

Each conversation is loaded through the same code path as ``memory-service eval``; every
category 1-4 question asks ``ContextService.build`` for a package of its session, by default
with no recent episodes (the latest turns of a long conversation rarely answer anything; that
measures memory, not continuity; ``--recent 5`` asks for the API's default). Printed per budget: precision (evidence episodes / kept episodes, over all
questions), evidence recall inside the package, and the episodes kept per question.

    python bench/context_precision.py --embedder hash
    python bench/context_precision.py --embedder local --budgets 50,200,1000
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

_PLACES = [base / "shared" / "eval" / "locomo-dev" for base in (ROOT.parent, ROOT.parent.parent)]
DEFAULT_DATA = next((place for place in _PLACES if place.exists()), _PLACES[0])


async def measure(settings: Settings, files: list[Path], budgets: list[int], recent: int) -> None:
    conversations = [evaluation.read_conversation(f) for f in files]
    async with evaluation.prepared(settings, conversations) as ready:
        context = ready.container.context()
        for budget in budgets:
            kept = evidence = 0
            recalls, sizes = [], []
            for item in ready.loaded:
                for question in item.conversation.questions:
                    package = await context.build(question.text, item.session_id, budget, recent_episodes=recent)
                    episodes = [e for e, _score in package.relevant_episodes] + list(package.recent_episodes)
                    episodes += list(getattr(package, "neighbour_episodes", []))
                    wanted = set(question.evidence)
                    turns = [set(e.metadata.get("turnIds", [])) for e in episodes]
                    kept += len(episodes)
                    evidence += sum(1 for t in turns if t & wanted)
                    covered = set().union(*turns) if turns else set()
                    recalls.append(len(wanted & covered) / len(wanted))
                    sizes.append(len(episodes))
            precision = evidence / kept if kept else 0.0
            print(f"budget {budget:>5}: precision {precision:.3f}  evidence recall {statistics.fmean(recalls):.3f}"
                  f"  episodes kept per question {statistics.fmean(sizes):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", default="hash", choices=["hash", "local"])
    parser.add_argument("--budgets", default="50,200,1000")
    parser.add_argument("--recent", type=int, default=0, help="recentEpisodes of each package")
    args = parser.parse_args()
    files = sorted(args.data.glob("*.json*")) if args.data.is_dir() else [args.data]
    settings = Settings(sqlite_path=":memory:", vector_index="memory", embedder=args.embedder,
                        embedding_dim=384 if args.embedder == "local" else 768, worker_batch=128)
    asyncio.run(measure(settings, files, [int(b) for b in args.budgets.split(",")], args.recent))


if __name__ == "__main__":
    main()
