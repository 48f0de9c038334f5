"""Retrieval quality on LoCoMo conversations: evidence recall@5/10/20 per ranker and category.

The same code path as ``memory-service eval`` (app/evaluation.py): each conversation becomes one
session whose episodes are consecutive turn pairs ("Name: text" on each side, an image's
blip_caption as the text a client would store, the turns' ids in metadata, the session's date as
createdAt); every category 1-4 question is searched scoped to its session with each ranker.

    python bench/locomo_recall.py --embedder hash
    python bench/locomo_recall.py --embedder local --json bench/results/locomo-local.json
    python bench/locomo_recall.py --embedder local --separate   # one store per conversation
    python bench/locomo_recall.py --embedder hash --rankers keyword --store postgres   # the keyword leg on PostgreSQL

``--separate`` loads each conversation into a store of its own, so BM25's statistics are the
conversation's alone (what scope-aware keyword statistics would give). ``--no-captions`` and
``--no-labels`` are ablations: without blip captions, and embedding episodes without the
"User:/Assistant:" labels.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import evaluation  # noqa: E402
from app.config import Settings  # noqa: E402
from domain.eval_conversations import Conversation, DatedSession  # noqa: E402
from domain.models import Episode  # noqa: E402

# ../shared beside the checkout, or beside the folder of worktrees a checkout may sit in.
_PLACES = [base / "shared" / "eval" / "locomo-dev" for base in (ROOT.parent, ROOT.parent.parent)]
DEFAULT_DATA = next((place for place in _PLACES if place.exists()), _PLACES[0])
DIMENSIONS = {"all-MiniLM-L6-v2": 384, "all-mpnet-base-v2": 768}


def without_captions(conversation: Conversation) -> Conversation:
    sessions = [DatedSession(s.name, [replace(t, caption=None) for t in s.turns], s.date)
                for s in conversation.sessions]
    return replace(conversation, sessions=sessions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a folder of .json/.jsonl files, or one file")
    parser.add_argument("--embedder", default="hash", choices=["hash", "local", "fake"])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--dim", type=int, default=None)
    parser.add_argument("--index", default="edge", choices=["edge", "memory"])
    parser.add_argument("--rankers", default=None, help="comma-separated (default: every ranker, default first)")
    parser.add_argument("--default-ranker", default=None)
    parser.add_argument("--separate", action="store_true", help="one store per conversation")
    parser.add_argument("--store", default="sqlite", choices=["sqlite", "postgres"],
                        help="postgres: a throwaway PostgreSQL 15 (tests/support/postgres.py), or the empty"
                             " database TEST_DATABASE_URL names")
    parser.add_argument("--no-captions", action="store_true")
    parser.add_argument("--no-labels", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    parser.add_argument("--min-score", type=float, default=None,
                        help="relevance floor, 0-1 (default: each ranker's, as a search; 0: none)")
    parser.add_argument("--no-keyword-budget", action="store_true",
                        help="rank every keyword match (domain.keywords.MATCH_BUDGET off): the before of the budget")
    args = parser.parse_args()
    planned = budget_counter(enabled=not args.no_keyword_budget)
    dim = args.dim or (DIMENSIONS.get(args.model, 384) if args.embedder == "local" else 768)
    files = sorted(args.data.glob("*.json*")) if args.data.is_dir() else [args.data]
    settings = Settings(sqlite_path=":memory:", vector_index=args.index, embedder=args.embedder,
                        embedding_model=args.model, embedding_dim=dim, worker_batch=128)
    if args.default_ranker:
        settings = settings.with_overrides(default_ranker=args.default_ranker)
    if args.no_captions:
        original = evaluation.read_conversation
        evaluation.read_conversation = lambda path: without_captions(original(path))
    if args.no_labels:
        Episode.text = property(lambda e: f"{e.user_message}\n{e.ai_response}")  # type: ignore[method-assign]
    rankers = args.rankers.split(",") if args.rankers else None
    groups = [[f] for f in files] if args.separate else [files]
    server = None
    if args.store == "postgres":
        from tests.support.postgres import PostgresServer

        server = PostgresServer().start()
    try:
        runs = []
        for group in groups:
            if server is not None:  # an empty database for each store
                settings = settings.with_overrides(store="postgres", database_url=server.new_database())
            runs.append(asyncio.run(evaluation.evaluate(settings, group, rankers, min_score=args.min_score)))
    finally:
        if server is not None:
            server.stop()
    tables = []
    for run in runs:
        print(evaluation.render(run))
        tables.append(evaluation.as_json(run))
    print(f"keyword searches: {planned['searches']}, over the budget ({'off' if args.no_keyword_budget else 'on'}):"
          f" {planned['bounded']} (terms left out {planned['dropped']}, cut to the newest {planned['newest']})")
    if args.json:
        out = tables[0] if len(tables) == 1 else tables
        if isinstance(out, dict):
            out["keyword_budget"] = {"enabled": not args.no_keyword_budget, **planned}
        args.json.write_text(json.dumps(out, indent=2))


def budget_counter(enabled: bool) -> dict[str, int]:
    """Counts the keyword searches the budget rule bounded (``enabled=False``: the rule is off and
    counts what it would have bounded), by wrapping the rule where every keyword adapter calls it."""
    from adapters.memory import keyword_index as memory_keywords
    from adapters.postgres import keyword_index as postgres_keywords
    from adapters.sqlite import keyword_index as sqlite_keywords
    from domain.keywords import KeywordPlan, within_budget

    planned = {"searches": 0, "bounded": 0, "dropped": 0, "newest": 0}

    def counted_rule(query, counts, scoped=False):
        plan = within_budget(query, counts, scoped)
        planned["searches"] += 1
        planned["bounded"] += plan.bounded
        planned["dropped"] += bool(plan.dropped)
        planned["newest"] += plan.newest is not None
        return plan if enabled else KeywordPlan(query)

    sqlite_keywords.within_budget = memory_keywords.within_budget = postgres_keywords.within_budget = counted_rule
    return planned


if __name__ == "__main__":
    main()
