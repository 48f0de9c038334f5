"""``EvaluationService``: load conversations into a memory, index them, and score rankers on them.

It uses the same services a request does (sessions, episodes, indexing, search), so a ranker
plugin's figures here are the figures it gets in production.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from domain.errors import Invalid
from domain.evaluation import LOCOMO_CATEGORY_NAMES, Conversation, episodes_of, recall
from domain.indexing import IndexingService
from domain.retrieval import SearchQuery, SearchService
from domain.services import MAX_BATCH, EpisodeService, SessionService

DEFAULT_KS = (5, 10, 20)


@dataclass(slots=True)
class Score:
    """Summed recall@k over ``questions`` questions; ``mean(k)`` is the figure reported."""

    sums: dict[int, float] = field(default_factory=dict)
    questions: int = 0

    def add(self, values: dict[int, float]) -> None:
        for k, value in values.items():
            self.sums[k] = self.sums.get(k, 0.0) + value
        self.questions += 1

    def mean(self, k: int) -> float:
        return self.sums.get(k, 0.0) / self.questions if self.questions else 0.0


@dataclass(slots=True)
class RankerReport:
    """One ranker's recall: over all questions, per category and per conversation."""

    ranker: str
    overall: Score = field(default_factory=Score)
    categories: dict[str, Score] = field(default_factory=dict)
    conversations: dict[str, Score] = field(default_factory=dict)
    degraded: int = 0  # searches answered by the keyword leg alone (embedder or index down)
    warning: str | None = None

    def spread(self, k: int) -> float:
        """The largest minus the smallest per-conversation recall@k: how much a figure rests on one
        conversation."""
        values = [s.mean(k) for s in self.conversations.values()]
        return max(values) - min(values) if values else 0.0

    def as_dict(self, ks: Sequence[int]) -> dict:
        def row(score: Score) -> dict:
            return {f"recall@{k}": score.mean(k) for k in ks} | {"questions": score.questions}

        at = 10 if 10 in ks else max(ks)
        return row(self.overall) | {
            f"spread@{at}": self.spread(at),
            "degraded": self.degraded,
            "categories": {name: row(s) for name, s in sorted(self.categories.items())},
            "conversations": {name: row(s) for name, s in self.conversations.items()},
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
                    ) -> list[RankerReport]:
        """Recall@k of each ranker (``None`` = the default) over every question, scoped to its session."""
        if not ks or min(ks) < 1:
            raise Invalid("k must be 1 or more", field="k")
        reports = []
        for ranker in rankers:
            report = RankerReport(ranker or "default")
            for item in loaded:
                for question in item.conversation.questions:
                    result = await self._search.search(SearchQuery(
                        question.text, limit=max(ks), session_id=item.session_id, ranker=ranker))
                    report.ranker = ranker or f"default ({result.ranker})"
                    if result.degraded:
                        report.degraded += 1
                        report.warning = result.warnings[0] if result.warnings else None
                    ranked = [hit.item.metadata.get("turnIds", []) for hit in result.hits]
                    values = {k: recall(question.evidence, ranked, k) for k in ks}
                    report.overall.add(values)
                    report.categories.setdefault(category_name(question.category), Score()).add(values)
                    report.conversations.setdefault(item.conversation.name, Score()).add(values)
            reports.append(report)
        return reports
