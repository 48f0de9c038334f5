"""Evaluation data: conversations with questions whose evidence turns are known, and how they
become a memory (episodes of consecutive turn pairs).

Pure shapes and parsing. Two input formats: LoCoMo conversation files, and a simple one (turns
and questions, one JSON object a line) for anyone's own conversations. ``domain.eval_scoring``
loads them through the real services and searches them; ``domain.eval_metrics`` scores the hits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from domain.errors import Invalid
from domain.models import NewEpisode, format_timestamp

LOCOMO_CATEGORIES = (1, 2, 3, 4)  # 5 is adversarial: no evidence to recall
LOCOMO_CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "inference", 4: "single-hop"}
_SESSION = re.compile(r"session_(\d+)")
# "D8:6", and the malformed shapes found in LoCoMo files: "D:11:26", "D 8:6", "D8:6; D9:17".
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


@dataclass(frozen=True, slots=True)
class Turn:
    id: str
    speaker: str
    text: str
    caption: str | None = None  # what an attached image shows, as a client would have stored it


@dataclass(frozen=True, slots=True)
class DatedSession:
    name: str
    turns: Sequence[Turn]
    date: str | None = None  # the store's timestamp format


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int | None = None


@dataclass(slots=True)
class EvidenceReport:
    """What the evidence lists held that is not a clean, existing turn id: reported, never hidden."""

    normalised: int = 0  # ids rewritten to the canonical shape ("D:11:26" -> "D11:26")
    unparsed: list[str] = field(default_factory=list)  # items with no turn id in them ("D")
    missing: list[str] = field(default_factory=list)  # well-formed ids of turns the conversation lacks
    empty: int = 0  # questions with no usable evidence at all (left out of recall)

    def describe(self) -> str:
        return (f"{self.empty} questions without usable evidence left out; {self.normalised} evidence ids "
                f"normalised, {len(self.unparsed)} unparsable {self.unparsed[:5]}, "
                f"{len(self.missing)} not in the conversation {self.missing[:5]}")


@dataclass(frozen=True, slots=True)
class Conversation:
    name: str
    sessions: Sequence[DatedSession]
    questions: Sequence[Question]
    report: EvidenceReport


def parse_locomo(data: Mapping, name: str) -> Conversation:
    """A LoCoMo conversation (``session_N`` turn lists, ``session_N_date_time``, ``qa``); the
    conversation may sit under a ``conversation`` key, as in the published file."""
    conv = data.get("conversation", data)
    if not isinstance(conv, Mapping) or not isinstance(data.get("qa"), list):
        raise Invalid(f"{name}: not a LoCoMo conversation (no session_N lists and qa)", field="file")
    sessions = []
    keys = sorted((k for k in conv if _SESSION.fullmatch(k) and isinstance(conv[k], list)),
                  key=lambda k: int(k.split("_")[1]))
    for key in keys:
        turns = [Turn(str(t["dia_id"]), str(t.get("speaker", "")), str(t.get("text", "")), t.get("blip_caption"))
                 for t in conv[key]]
        sessions.append(DatedSession(key, turns, _locomo_date(conv.get(f"{key}_date_time"))))
    report = EvidenceReport()
    known = {t.id for s in sessions for t in s.turns}
    questions = []
    for qa in data["qa"]:
        if qa.get("category") not in LOCOMO_CATEGORIES:
            continue
        evidence = _normalise_evidence(qa.get("evidence") or [], report)
        questions.append(Question(str(qa["question"]), evidence, qa.get("category")))
    return Conversation(name, sessions, _usable(questions, known, report), report)


def parse_jsonl(records: Iterable[Mapping], name: str) -> Conversation:
    """The simple format: ``{"turn": id, "speaker", "text", "session"?, "date"?}`` and
    ``{"question", "evidence": [turn ids], "category"?}`` objects, turns in conversation order."""
    sessions: dict[str, list[Turn]] = {}
    dates: dict[str, str | None] = {}
    questions = []
    for number, record in enumerate(records, start=1):
        if "question" in record:
            evidence = record.get("evidence") or []
            if not isinstance(evidence, list):
                raise Invalid(f"{name} line {number}: evidence must be a list of turn ids", field="evidence")
            questions.append(Question(str(record["question"]), tuple(map(str, evidence)), record.get("category")))
        elif "turn" in record and "text" in record:
            session = str(record.get("session", "session"))
            sessions.setdefault(session, []).append(
                Turn(str(record["turn"]), str(record.get("speaker", "")), str(record["text"]), record.get("caption"))
            )
            if record.get("date") and session not in dates:
                dates[session] = format_timestamp(datetime.fromisoformat(str(record["date"]).replace("Z", "+00:00")))
        else:
            raise Invalid(f"{name} line {number}: neither a turn (turn, text) nor a question", field="file")
    report = EvidenceReport()
    known = {t.id for turns in sessions.values() for t in turns}
    built = [DatedSession(key, turns, dates.get(key)) for key, turns in sessions.items()]
    return Conversation(name, built, _usable(questions, known, report), report)


def _locomo_date(text: object) -> str | None:
    if not isinstance(text, str):
        return None
    try:
        return format_timestamp(datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y"))
    except ValueError:
        return None


def _normalise_evidence(items: Sequence, report: EvidenceReport) -> tuple[str, ...]:
    ids: dict[str, None] = {}
    for item in items:
        found = [f"D{a}:{b}" for a, b in _DIA_ID.findall(str(item))]
        if not found:
            report.unparsed.append(str(item))
        elif found != [str(item)]:
            report.normalised += 1
        ids.update(dict.fromkeys(found))
    return tuple(ids)


def _usable(questions: list[Question], known: set[str], report: EvidenceReport) -> list[Question]:
    # An id of a turn the conversation does not have is a data error no ranker can recall: it is
    # reported and left out of the question's denominator rather than counted as a miss.
    usable = []
    for q in questions:
        report.missing.extend(i for i in q.evidence if i not in known)
        kept = tuple(i for i in q.evidence if i in known)
        if kept:
            usable.append(Question(q.text, kept, q.category))
        else:
            report.empty += 1
    return usable


def turn_pairs(conversation: Conversation) -> list[list[Turn]]:
    """The turns each episode holds: consecutive pairs within each session."""
    return [list(session.turns[i:i + 2]) for session in conversation.sessions for i in range(0, len(session.turns), 2)]


def episodes_of(conversation: Conversation, session_id: int) -> list[NewEpisode]:
    """An episode per pair of consecutive turns of a session, "Speaker: text" on each side (with an
    image's caption as the client saw it), the turn ids in metadata, the session's date as created_at."""
    out = []
    for session in conversation.sessions:
        for i in range(0, len(session.turns), 2):
            pair = session.turns[i:i + 2]
            sides = [_said(turn) for turn in pair] + [""]
            out.append(NewEpisode(session_id, sides[0], sides[1], metadata={
                "turnIds": [t.id for t in pair], "session": session.name}, created_at=session.date))
    return out


def _said(turn: Turn) -> str:
    text = f"{turn.speaker}: {turn.text}" if turn.speaker else turn.text
    return f"{text} [shares a photo of {turn.caption}]" if turn.caption else text
