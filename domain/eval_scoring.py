"""``EvaluationService``: load conversations into a memory, index them, and score rankers on them
(evidence recall, and LongMemEval's recall_all, recall_any and ndcg, at each k).

It uses the same services a request does (sessions, episodes, indexing, search), so a ranker
plugin's figures here are the figures it gets in production.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from domain.errors import Invalid
from domain.eval_conversations import LOCOMO_CATEGORY_NAMES, Conversation, episodes_of, turn_pairs
from domain.eval_metrics import ndcg, recall, recall_all, recall_any
from domain.indexing import IndexingService
from domain.retrieval import SearchQuery, SearchService
from domain.services import MAX_BATCH, EpisodeService, SessionService

DEFAULT_KS = (5, 10, 20)
METRICS = ("recall", "recall_all", "recall_any", "ndcg")
"""Evidence recall (this project's headline figure), then LongMemEval's retrieval metrics."""


@dataclass(slots=True)
class Score:
    """Each metric at each k summed over ``questions`` questions; ``mean(k)`` is evidence
    recall@k, ``mean(k, metric)`` any other."""

    sums: dict[tuple[str, int], float] = field(default_factory=dict)
    questions: int = 0

    def add(self, values: dict[tuple[str, int], float]) -> None:
        for key, value in values.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
        self.questions += 1

    def mean(self, k: int, metric: str = "recall") -> float:
        return self.sums.get((metric, k), 0.0) / self.questions if self.questions else 0.0


@dataclass(slots=True)
class RankerReport:
    """One ranker's recall: over all questions, per category and per conversation."""

    ranker: str
    overall: Score = field(default_factory=Score)
    categories: dict[str, Score] = field(default_factory=dict)
    conversations: dict[str, Score] = field(default_factory=dict)
    conversation_categories: dict[tuple[str, str], Score] = field(default_factory=dict)
    """Per conversation and category: a change that lifts a category in one conversation and
    lowers it in another is fitted to the data, not better, and the totals can hide it."""
    degraded: int = 0  # searches answered by the keyword leg alone (embedder or index down)
    warning: str | None = None

    def spread(self, k: int) -> float:
        """The largest minus the smallest per-conversation recall@k: how much a figure rests on one
        conversation."""
        values = [s.mean(k) for s in self.conversations.values()]
        return max(values) - min(values) if values else 0.0

    def as_dict(self, ks: Sequence[int]) -> dict:
        def row(score: Score) -> dict:
            return {f"{metric}@{k}": score.mean(k, metric) for metric in METRICS for k in ks} | {
                "questions": score.questions}

        at = 10 if 10 in ks else max(ks)
        return row(self.overall) | {
            f"spread@{at}": self.spread(at),
            "degraded": self.degraded,
            "categories": {name: row(s) for name, s in sorted(self.categories.items())},
            "conversations": {name: row(s) | {"categories": {
                category: row(score) for (conv, category), score in sorted(self.conversation_categories.items())
                if conv == name}} for name, s in self.conversations.items()},
        }


@dataclass(frozen=True, slots=True)
class Loaded:
    conversation: Conversation
    session_id: int


def category_name(category: int | None) -> str:
    if category is None:
        return "uncategorised"
    return f"{category} {LOCOMO_CATEGORY_NAMES.get(category, '')}".strip()


class EvaluationService:
    def __init__(
        self, sessions: SessionService, episodes: EpisodeService, indexing: IndexingService, search: SearchService,
    ) -> None:
        self._sessions = sessions
        self._episodes = episodes
        self._indexing = indexing
        self._search = search

    async def load(self, conversation: Conversation, batch: int = 128) -> Loaded:
        """Store the conversation as one session and embed it (every queued job done or deferred)."""
        session = await self._sessions.create(f"eval-{conversation.name}", {"evaluation": conversation.name})
        episodes = episodes_of(conversation, session.id)
        for start in range(0, len(episodes), MAX_BATCH):
            await self._episodes.add_batch(episodes[start:start + MAX_BATCH])
        # A pass that completes nothing means the rest is deferred (embedder down): searching then
        # measures the keyword leg alone, which the search's `degraded` flag would say; stop here.
        while (await self._indexing.run_once(batch)).done:
            pass
        return Loaded(conversation, session.id)

    async def score(self, loaded: Sequence[Loaded], rankers: Sequence[str | None], ks: Sequence[int] = DEFAULT_KS,
                    min_score: float | None = None) -> list[RankerReport]:
        """Each metric at each k for each ranker (``None`` = the default) over every question,
        scoped to its session. ``min_score`` as in a search: by default each ranker's relevance
        floor applies, so the figures are what a client gets."""
        if not ks or min(ks) < 1:
            raise Invalid("k must be 1 or more", field="k")
        reports = []
        for ranker in rankers:
            report = RankerReport(ranker or "default")
            for item in loaded:
                pairs = [{turn.id for turn in pair} for pair in turn_pairs(item.conversation)]
                for question in item.conversation.questions:
                    result = await self._search.search(SearchQuery(
                        question.text, limit=max(ks), session_id=item.session_id, ranker=ranker,
                        min_score=min_score))
                    report.ranker = ranker or f"default ({result.ranker})"
                    if result.degraded:
                        report.degraded += 1
                        report.warning = result.warnings[0] if result.warnings else None
                    ranked = [hit.item.metadata.get("turnIds", []) for hit in result.hits]
                    wanted = set(question.evidence)
                    relevant = sum(1 for pair in pairs if pair & wanted)
                    values = {}
                    for k in ks:
                        values[("recall", k)] = recall(question.evidence, ranked, k)
                        values[("recall_all", k)] = recall_all(question.evidence, ranked, k)
                        values[("recall_any", k)] = recall_any(question.evidence, ranked, k)
                        values[("ndcg", k)] = ndcg(question.evidence, ranked, k, relevant)
                    report.overall.add(values)
                    report.categories.setdefault(category_name(question.category), Score()).add(values)
                    report.conversations.setdefault(item.conversation.name, Score()).add(values)
                    report.conversation_categories.setdefault(
                        (item.conversation.name, category_name(question.category)), Score()).add(values)
            reports.append(report)
        return reports
