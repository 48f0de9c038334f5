"""Parsing conversations for evaluation: LoCoMo and the simple JSONL format, evidence clean-up."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from domain.errors import Invalid
from domain.eval_conversations import episodes_of, parse_jsonl, parse_locomo
from domain.eval_metrics import ndcg, recall, recall_all, recall_any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "eval"


def test_locomo_evidence_is_normalised_and_what_cannot_be_used_is_reported() -> None:
    conversation = parse_locomo(json.loads((FIXTURES / "tiny-locomo.json").read_text()), "tiny")
    by_text = {q.text: q for q in conversation.questions}
    assert by_text["When did Ana fly in a zeppelin?"].evidence == ("D1:1",)  # from "D:1:1"
    assert by_text["What is the greyhound called?"].evidence == ("D1:4", "D2:2")  # from "D1:4; D2:2"
    assert by_text["What colour is the sofa?"].evidence == ("D2:2",)
    assert "Who is nobody?" not in by_text and "Adversarial?" not in by_text
    report = conversation.report
    assert (report.normalised, report.unparsed, report.missing, report.empty) == (2, ["D"], ["D7:7"], 1)


def test_locomo_episodes_pair_turns_carry_captions_ids_and_session_dates() -> None:
    conversation = parse_locomo(json.loads((FIXTURES / "tiny-locomo.json").read_text()), "tiny")
    episodes = episodes_of(conversation, session_id=7)
    assert [e.metadata["turnIds"] for e in episodes] == [["D1:1", "D1:2"], ["D1:3", "D1:4"], ["D2:1", "D2:2"]]
    assert episodes[0].user_message == "Ana: I finally flew in a zeppelin over the lake"
    assert episodes[2].ai_response == "Ben: Pixel sleeps all day on the sofa [shares a photo of a grey dog asleep on a red sofa]"
    assert [e.created_at for e in episodes] == ["2025-05-05T10:00:00.000Z"] * 2 + ["2025-05-09T18:00:00.000Z"]
    assert {e.session_id for e in episodes} == {7}


def test_jsonl_turns_and_questions() -> None:
    lines = (FIXTURES / "tiny.jsonl").read_text().splitlines()
    conversation = parse_jsonl((json.loads(line) for line in lines), "tiny")
    assert [s.name for s in conversation.sessions] == ["monday", "friday"]
    assert [q.evidence for q in conversation.questions] == [("t1",), ("t4", "t6"), ("t6",)]
    assert (conversation.report.missing, conversation.report.empty) == (["t99"], 1)
    assert episodes_of(conversation, 1)[2].created_at == "2025-05-09T18:00:00.000Z"


def test_a_jsonl_line_that_is_neither_turn_nor_question_is_invalid_naming_the_line() -> None:
    with pytest.raises(Invalid, match="line 2"):
        parse_jsonl([{"turn": "a", "text": "hi"}, {"what": "?"}], "bad")


def test_a_file_that_is_not_locomo_is_invalid() -> None:
    with pytest.raises(Invalid, match="not a LoCoMo conversation"):
        parse_locomo({"hello": "world"}, "bad")


def test_recall_is_the_share_of_evidence_the_first_k_episodes_cover() -> None:
    ranked = [["a", "b"], ["c", "d"], ["e", "f"]]
    assert recall(["b", "e"], ranked, 1) == 0.5
    assert recall(["b", "e"], ranked, 3) == 1.0
    assert recall(["z"], ranked, 3) == 0.0


@pytest.mark.parametrize(("name", "content"), [
    ("list.json", "[]"),  # a JSON array where a conversation object belongs
    ("many.json", '[{"qa": [], "session_1": []}, 5]'),
    ("qa.json", '{"qa": [null, 5], "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}'),
    ("turn.json", '{"qa": [], "session_1": [null]}'),
    ("deep.json", "[" * 100_000 + "]" * 100_000),
    ("line.jsonl", '"turn text"\n'),  # a JSON string where a record belongs
    ("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n"),
])
def test_a_malformed_conversation_file_is_invalid_naming_it_not_a_crash(tmp_path: Path, name: str, content: str):
    from app.evaluation import read_conversation

    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(Invalid) as raised:
        read_conversation(path)
    assert name in raised.value.message


def test_recall_any_and_all_ask_for_one_and_for_every_evidence_turn_in_the_top_k() -> None:
    ranked = [["D1:1", "D1:2"], ["D1:3", "D1:4"], ["D2:1", "D2:2"]]
    assert recall_any(["D1:3", "D2:1"], ranked, 2) == 1.0 and recall_all(["D1:3", "D2:1"], ranked, 2) == 0.0
    assert recall_all(["D1:3", "D2:1"], ranked, 3) == 1.0 and recall_any(["D9:9"], ranked, 3) == 0.0


def test_ndcg_is_one_for_the_ideal_order_and_discounts_a_lower_rank() -> None:
    ranked = [["D1:1", "D1:2"], ["D1:3", "D1:4"], ["D2:1", "D2:2"]]
    assert ndcg(["D1:1"], ranked, 3, relevant=1) == 1.0
    assert ndcg(["D1:3"], ranked, 3, relevant=1) == pytest.approx(1 / math.log2(3))
    assert ndcg(["D1:1", "D2:1"], ranked, 3, relevant=2) == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    assert ndcg(["D9:9"], ranked, 3, relevant=1) == 0.0
