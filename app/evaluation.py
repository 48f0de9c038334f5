"""``memory-service eval``: measure retrieval on your own conversations.

Each file (LoCoMo ``.json``, or ``.jsonl`` turns and questions) is loaded into a throwaway store
(a temporary SQLite file and vector index, never the configured one) with the configured embedder
and rankers, plugins included, then every question is searched with each ranker.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.config import Settings
from app.container import build_container, opened
from domain.errors import Invalid
from domain.eval_conversations import Conversation, parse_jsonl, parse_locomo
from domain.eval_scoring import DEFAULT_KS, EvaluationService, Loaded, RankerReport


@dataclass(frozen=True, slots=True)
class EvaluationRun:
    conversations: list[Conversation]
    reports: list[RankerReport]
    default_ranker: str
    embedder: str
    load_seconds: float


def read_conversation(path: Path) -> Conversation:
    """A conversation file by its suffix: ``.jsonl`` is the simple format, anything else LoCoMo JSON."""
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            return parse_jsonl((json.loads(line) for line in text.splitlines() if line.strip()), path.stem)
        return parse_locomo(json.loads(text), path.stem)
    except RecursionError:
        raise Invalid(f"{path}: cannot read it as a conversation: JSON nested too deeply", field="file") from None
    # AttributeError: a JSON value of another type where an object belongs (a list, a string).
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise Invalid(f"{path}: cannot read it as a conversation: {exc}", field="file") from None


@dataclass(frozen=True, slots=True)
class Prepared:
    """Conversations loaded and embedded in a throwaway store, ready to be searched."""

    container: object
    service: EvaluationService
    loaded: list[Loaded]
    load_seconds: float


@contextlib.asynccontextmanager
async def prepared(settings: Settings, conversations: Sequence[Conversation]) -> AsyncIterator[Prepared]:
    """``conversations`` in a temporary SQLite file and vector index with the configured embedder
    and rankers, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="memory-eval-") as tmp:
        index = settings.vector_index if settings.vector_index != "server" else "edge"
        # A PostgreSQL store is kept (its DATABASE_URL must name an empty database); any other is
        # a temporary SQLite file.
        store = "postgres" if settings.store == "postgres" else "sqlite"
        isolated = settings.with_overrides(
            store=store, sqlite_path=f"{tmp}/eval.db", qdrant_path=f"{tmp}/eval.qdrant", vector_index=index,
        )
        async with opened(isolated) as container:
            await container.store_resource()
            await (await container.index_manager_resource()).start()  # a fresh store: empty generations, no build
            indexing = container.indexing()
            service = EvaluationService(container.sessions(), container.episodes(), indexing, container.search())
            started = time.monotonic()
            loaded = [await service.load(c, batch=isolated.worker_batch) for c in conversations]
            yield Prepared(container, service, loaded, time.monotonic() - started)


def ranker_names(settings: Settings, rankers: Sequence[str] | None) -> list[str]:
    """The rankers asked for, checked (an unknown name fails before minutes of loading); by
    default every registered one, the default ranker first."""
    registry = build_container(settings).rankers()
    names = list(rankers) if rankers else [settings.default_ranker] + [
        n for n in registry.names() if n != settings.default_ranker]
    for name in names:
        registry.get(name)
    return names


async def evaluate(settings: Settings, paths: Sequence[Path], rankers: Sequence[str] | None,
                   ks: Sequence[int] = DEFAULT_KS, min_score: float | None = None) -> EvaluationRun:
    """The metrics at each k of ``rankers`` (default: every registered one, the default ranker
    first); ``min_score`` as in a search (default: each ranker's relevance floor)."""
    conversations = [read_conversation(path) for path in paths]
    names = ranker_names(settings, rankers)
    async with prepared(settings, conversations) as ready:
        reports = await ready.service.score(ready.loaded, names, ks, min_score)
    return EvaluationRun(conversations, reports, settings.default_ranker, _embedder_label(settings), ready.load_seconds)


def _embedder_label(s: Settings) -> str:
    size = f"{s.embedding_dim}-d" if s.embedding_dim else "its own size"  # unset: the model's own
    if s.embedder in ("local", "sentence-transformers", "ollama", "openai"):
        return f"{s.embedder} ({s.model_name}, {size})"
    return f"{s.embedder} ({size})"


def spread_k(ks: Sequence[int]) -> int:
    """The cut-off the spread between conversations is reported at: 10 when asked for, else the largest."""
    return 10 if 10 in ks else max(ks)


def render(run: EvaluationRun, ks: Sequence[int] = DEFAULT_KS) -> str:
    """The recall table, per ranker then per category, with the spread between conversations."""
    names = ", ".join(c.name for c in run.conversations)
    lines = [f"evidence recall on {names}: embedder {run.embedder}, default ranker {run.default_ranker}, "
             f"loaded+embedded in {run.load_seconds:.0f}s"]
    for c in run.conversations:
        lines.append(f"  {c.name}: {len(c.questions)} questions; {c.report.describe()}")
    head = "".join(f"{f'R@{k}':>7}" for k in ks)
    at = spread_k(ks)
    lines.append(f"{'ranker':<24}{head}  {f'spread@{at}':>9}  questions")
    for report in run.reports:
        cells = "".join(f"{report.overall.mean(k):>7.3f}" for k in ks)
        lines.append(f"{report.ranker:<24}{cells}  {report.spread(at):>9.3f}  {report.overall.questions}")
        for metric in ("recall_all", "recall_any", "ndcg"):  # LongMemEval's, to compare with published figures
            cells = "".join(f"{report.overall.mean(k, metric):>7.3f}" for k in ks)
            lines.append(f"  {metric:<22}{cells}")
        if report.degraded:
            lines.append(f"  WARNING: {report.degraded} searches answered by the keyword leg alone: {report.warning}")
        for name, score in sorted(report.categories.items()):
            cells = "".join(f"{score.mean(k):>7.3f}" for k in ks)
            lines.append(f"  {'category ' + name:<22}{cells}  {'':>9}  {score.questions}")
        if len(report.conversations) > 1:
            for conversation, score in report.conversations.items():
                cells = "".join(f"{score.mean(k):>7.3f}" for k in ks)
                lines.append(f"  {'conversation ' + conversation:<22}{cells}  {'':>9}  {score.questions}")
                for (name, category), part in sorted(report.conversation_categories.items()):
                    if name == conversation:
                        cells = "".join(f"{part.mean(k):>7.3f}" for k in ks)
                        lines.append(f"    {category:<20}{cells}  {'':>9}  {part.questions}")
    return "\n".join(lines)


def as_json(run: EvaluationRun, ks: Sequence[int] = DEFAULT_KS) -> dict:
    return {
        "data": [c.name for c in run.conversations],
        "embedder": run.embedder,
        "default_ranker": run.default_ranker,
        "evidence": {c.name: {"questions": len(c.questions), "empty": c.report.empty,
                              "normalised": c.report.normalised, "unparsed": c.report.unparsed,
                              "missing": c.report.missing} for c in run.conversations},
        "table": {report.ranker: report.as_dict(ks) for report in run.reports},
    }
