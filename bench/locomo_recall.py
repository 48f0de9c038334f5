"""Retrieval quality on the LoCoMo development set: evidence recall@5/10/20 per ranker.

Loads each conversation through the REST API (one session per conversation; an episode per pair
of consecutive turns, "Name: text" on each side, the turns' dia_ids in metadata, the session's
date as createdAt), waits for the embedding backlog to drain, then asks every category 1-4
question scoped to its session with each ranker and scores the share of the question's
evidence dia_ids that the top-k episodes cover, averaged over questions.

    python bench/locomo_recall.py --embedder hash
    python bench/locomo_recall.py --embedder local --model all-MiniLM-L6-v2 --dim 384

The ranked list is asked for once at limit 20 and recall@5/10 read from its prefix.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from litestar.testing import TestClient  # noqa: E402

from app.config import Settings  # noqa: E402
from app.main import create_app  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "locomo-dev"
KS = (5, 10, 20)


def session_keys(conv: dict) -> list[str]:
    keys = [k for k in conv if re.fullmatch(r"session_\d+", k) and isinstance(conv[k], list)]
    return sorted(keys, key=lambda k: int(k.split("_")[1]))


def parse_when(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").isoformat() + "Z"
    except ValueError:
        return None


def episodes_of(conv: dict, session_id: int) -> list[dict]:
    out = []
    for key in session_keys(conv):
        turns = conv[key]
        when = parse_when(conv.get(f"{key}_date_time"))
        for i in range(0, len(turns), 2):
            pair = turns[i:i + 2]
            first = pair[0]
            second = pair[1] if len(pair) > 1 else None
            body = {
                "sessionId": session_id,
                "userMessage": f"{first['speaker']}: {first['text']}",
                "aiResponse": f"{second['speaker']}: {second['text']}" if second else "",
                "metadata": {"diaIds": [t["dia_id"] for t in pair], "session": key},
            }
            if when:
                body["createdAt"] = when
            out.append(body)
    return out


def evidence_ids(qa: dict) -> set[str]:
    ids: set[str] = set()
    for item in qa.get("evidence") or []:
        ids.update(re.findall(r"D\d+:\d+", item))
    return ids


def load(client: TestClient, path: Path) -> tuple[int, list[dict]]:
    conv_file = json.loads(path.read_text())
    conv = conv_file.get("conversation", conv_file)
    sid = client.post("/sessions", json={"externalId": f"locomo-{path.stem}"}).json()["id"]
    episodes = episodes_of(conv, sid)
    for start in range(0, len(episodes), 500):
        r = client.post("/episodes/batch", json={"episodes": episodes[start:start + 500]})
        r.raise_for_status()
    questions = [q for q in conv_file["qa"] if q.get("category") in (1, 2, 3, 4) and evidence_ids(q)]
    return sid, questions


def wait_for_backlog(client: TestClient, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        backlog = client.get("/health").json()["components"]["embeddingBacklog"]
        if backlog["pending"] == 0:
            return
        time.sleep(0.5)
    raise SystemExit("the embedding backlog did not drain in time")


def recall_table(client: TestClient, sets: list[tuple[int, list[dict]]], rankers: list[str]) -> dict:
    table = {}
    for ranker in rankers:
        sums = {k: 0.0 for k in KS}
        n = 0
        for sid, questions in sets:
            for qa in questions:
                wanted = evidence_ids(qa)
                body = {"query": qa["question"], "limit": max(KS), "sessionId": sid, "ranker": ranker}
                hits = client.post("/search", json=body).json()["hits"]
                for k in KS:
                    covered = set()
                    for hit in hits[:k]:
                        covered.update(hit["episode"]["metadata"].get("diaIds", []))
                    sums[k] += len(wanted & covered) / len(wanted)
                n += 1
        table[ranker] = {f"recall@{k}": sums[k] / n for k in KS} | {"questions": n}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", default="hash", choices=["hash", "local", "fake"])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--dim", type=int, default=None)
    parser.add_argument("--index", default="edge", choices=["edge", "memory"])
    parser.add_argument("--rankers", default="rrf,vector,keyword,weighted,recency,mmr")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    dim = args.dim or (384 if args.embedder == "local" else 768)
    files = sorted(args.data.glob("*.json"))
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(sqlite_path=f"{tmp}/locomo.db", vector_index=args.index, embedder=args.embedder,
                            embedding_model=args.model, embedding_dim=dim, worker_batch=128)
        started = time.monotonic()
        with TestClient(create_app(settings), timeout=600) as client:
            sets = [load(client, f) for f in files]
            wait_for_backlog(client)
            loaded = time.monotonic() - started
            table = recall_table(client, sets, args.rankers.split(","))
    label = f"{args.embedder}" + (f" ({args.model}, {dim}-d)" if args.embedder == "local" else f" ({dim}-d)")
    print(f"LoCoMo dev ({', '.join(f.stem for f in files)}): evidence recall, embedder {label}, "
          f"index {args.index}, loaded+embedded in {loaded:.0f}s")
    print(f"{'ranker':<10} {'R@5':>7} {'R@10':>7} {'R@20':>7}  questions")
    for name, row in table.items():
        print(f"{name:<10} {row['recall@5']:>7.3f} {row['recall@10']:>7.3f} {row['recall@20']:>7.3f}  {row['questions']}")
    if args.json:
        args.json.write_text(json.dumps({"embedder": label, "table": table}, indent=2))


if __name__ == "__main__":
    main()
