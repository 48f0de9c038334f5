"""Search latency with read-your-writes on and off, and whether a just-written episode is found.

One LoCoMo conversation is loaded and embedded (no background worker runs: nothing else embeds).
Then, for each mode, ``--rounds`` times: write one new episode that answers a fixed question and
search that question in its session at once. Printed per mode: p50 and p90 of the search, the
share of searches whose hits hold the new episode, and ``pending`` as answered; and the p50 of
the same search with nothing waiting (the cost of the check alone).

    python bench/read_your_writes.py --embedder local
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import evaluation  # noqa: E402
from app.config import Settings  # noqa: E402
from domain.models import NewEpisode  # noqa: E402
from domain.retrieval import SearchQuery  # noqa: E402

_PLACES = [base / "shared" / "eval" / "locomo-dev" / "26.json" for base in (ROOT.parent, ROOT.parent.parent)]
DEFAULT_FILE = next((place for place in _PLACES if place.exists()), _PLACES[0])
QUESTION = "Any allergies I should know about?"  # no word of it is in the answer: only meaning finds it


def ms(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=10)[q - 1] * 1000 if len(values) >= 10 else statistics.median(values) * 1000


async def measure(settings: Settings, path: Path, rounds: int) -> None:
    async with evaluation.prepared(settings, [evaluation.read_conversation(path)]) as ready:
        search, episodes = ready.container.search(), ready.container.episodes()
        session = ready.loaded[0].session_id
        took = {True: [], False: []}
        found = {True: 0, False: 0}
        pending = {True: [], False: []}
        for i in range(rounds):
            for mode in (True, False):  # alternated, so that neither gets the warmer cache
                [new] = await episodes.add_batch([NewEpisode(
                    session, f"Caroline: I found out I am allergic to shellfish, test {i}", "Melanie: Oh no!")])
                started = time.perf_counter()
                result = await search.search(SearchQuery(QUESTION, limit=10, session_id=session, read_your_writes=mode))
                took[mode].append(time.perf_counter() - started)
                found[mode] += any(hit.item.id == new.id for hit in result.hits)
                pending[mode].append(result.pending)
                await episodes.delete(new.id)  # the next round's episode is the only one of its kind
                await search.search(SearchQuery(QUESTION, limit=10, session_id=session))  # nothing left waiting
        for mode in (True, False):
            print(f"read-your-writes {'on ' if mode else 'off'}: search after a write p50 {ms(took[mode], 5):.1f} ms,"
                  f" p90 {ms(took[mode], 9):.1f} ms; new episode in the hits {found[mode]}/{rounds};"
                  f" pending answered {statistics.fmean(pending[mode]):.1f} on average")
        quiet = {True: [], False: []}
        for _ in range(rounds):
            for mode in (True, False):
                started = time.perf_counter()
                await search.search(SearchQuery(QUESTION, limit=10, session_id=session, read_your_writes=mode))
                quiet[mode].append(time.perf_counter() - started)
        for mode in (True, False):
            print(f"read-your-writes {'on ' if mode else 'off'}: search with nothing waiting p50 {ms(quiet[mode], 5):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_FILE, help="one LoCoMo .json or .jsonl conversation")
    parser.add_argument("--embedder", default="hash", choices=["hash", "local"])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    settings = Settings(sqlite_path=":memory:", embedder=args.embedder,
                        embedding_dim=384 if args.embedder == "local" else 768, worker_batch=128)
    asyncio.run(measure(settings, args.data, args.rounds))


if __name__ == "__main__":
    main()
