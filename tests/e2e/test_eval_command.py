"""`memory-service eval` as a user runs it: a real process on tiny conversations in both formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "eval"
CLI = [sys.executable, "-m", "app.cli"]


def _run(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBEDD", "VECTOR_", "QDRANT_", "RANKER"))}
    env |= {"SQLITE_PATH": str(tmp_path / "configured.db"), "EMBEDDER": "hash", "EMBEDDING_DIM": "64"} | settings
    return subprocess.run([*CLI, "eval", *args], env=env, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])


def test_eval_reports_recall_per_ranker_category_and_conversation(tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    done = _run(tmp_path, str(FIXTURES / "tiny.jsonl"), str(FIXTURES / "tiny-locomo.json"),
                "--rankers", "keyword,conversation", "--k", "1,2", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "keyword" in done.stdout and "category 4 single-hop" in done.stdout
    table = json.loads(out.read_text())
    assert list(table["table"]) == ["keyword", "conversation"]
    assert table["default_ranker"] == "conversation"
    keyword = table["table"]["keyword"]
    assert keyword["questions"] == 3 + 4 and keyword["degraded"] == 0
    # Both "zeppelin" questions name a word only their evidence turn has.
    assert keyword["categories"]["4 single-hop"] == {
        f"{metric}@{k}": 1.0 for metric in ("recall", "recall_all", "recall_any", "ndcg") for k in (1, 2)
    } | {"questions": 2}
    assert "recall_all" in done.stdout and "ndcg" in done.stdout
    assert set(keyword["conversations"]) == {"tiny", "tiny-locomo"}
    # Each conversation's categories on their own: a change must hold in each, not only in the total.
    assert keyword["conversations"]["tiny"]["categories"]["4 single-hop"]["recall@1"] == 1.0
    per_conversation = keyword["conversations"]["tiny-locomo"]["categories"]
    assert sum(c["questions"] for c in per_conversation.values()) == keyword["conversations"]["tiny-locomo"]["questions"]
    assert "conversation tiny-locomo" in done.stdout
    assert table["evidence"]["tiny"] == {"questions": 3, "empty": 1, "normalised": 0, "unparsed": [], "missing": ["t99"]}
    assert table["evidence"]["tiny-locomo"] == {
        "questions": 4, "empty": 1, "normalised": 2, "unparsed": ["D"], "missing": ["D7:7"]}
    # The configured store is never touched: eval loads into a throwaway one.
    assert not (tmp_path / "configured.db").exists()


def test_eval_of_a_file_that_is_not_a_conversation_fails_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    done = _run(tmp_path, str(bad))
    assert done.returncode == 2 and "notes" in done.stderr and "LoCoMo" in done.stderr


def test_eval_with_an_unknown_ranker_fails_before_loading(tmp_path: Path) -> None:
    done = _run(tmp_path, str(FIXTURES / "tiny.jsonl"), "--rankers", "nope")
    assert done.returncode == 2 and "unknown ranker 'nope'" in done.stderr


def test_eval_says_when_the_embedder_was_down_and_only_keywords_answered(tmp_path: Path) -> None:
    # Nothing listens on port 9: every embedding fails at once, the jobs are deferred, and each
    # search is answered by the keyword leg alone — which the report must say, not hide.
    done = _run(tmp_path, str(FIXTURES / "tiny.jsonl"), "--rankers", "weighted",
                EMBEDDER="embedding-service", EMBEDDING_SERVICE_URL="http://127.0.0.1:9")
    assert done.returncode == 0, done.stderr
    assert "WARNING: 3 searches answered by the keyword leg alone" in done.stdout


def test_a_json_path_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    for target in (tmp_path, tmp_path / "missing-dir" / "table.json"):  # a directory; a file in no directory
        done = _run(tmp_path, str(FIXTURES / "tiny.jsonl"), "--json", str(target))
        assert done.returncode == 2, done.stderr
        assert "--json" in done.stderr and "Traceback" not in done.stderr
        assert "R@5" not in done.stdout  # refused before loading and searching anything
