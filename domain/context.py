"""The context package: what an assistant puts into its prompt for one turn.

It holds the session's most recent episodes (continuity), the most relevant older episodes and
matching summaries (memory), and the entities those mention with their relationships (facts),
deduplicated and cut to a token budget. Items are admitted in that priority order; whatever does
not fit is listed in ``omitted`` so the caller knows what it is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from domain.errors import Invalid, NotFound
from domain.limits import MAX_QUERY, MAX_RECENT_EPISODES, MAX_TOKEN_BUDGET
from domain.models import Entity, Episode, Owner, Relationship, Summary
from domain.retrieval import SearchQuery, SearchService
from domain.services import check_limit, check_text
from domain.record_kinds import EPISODES, SUMMARIES
from ports.store import Store

CHARS_PER_TOKEN = 4
"""The token estimate where a record carries no ``tokenCount``: about 4 characters per token,
the usual figure for English text with BPE tokenizers (rounded up, plus 4 tokens of framing)."""

MAX_ENTITIES = 50


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) + 4


def episode_tokens(episode: Episode) -> int:
    return episode.token_count if episode.token_count is not None else estimate_tokens(episode.text)


def summary_tokens(summary: Summary) -> int:
    return summary.token_count if summary.token_count is not None else estimate_tokens(summary.content)


@dataclass(frozen=True, slots=True)
class Omitted:
    kind: str
    id: int
    tokens: int


@dataclass(frozen=True, slots=True)
class ContextPackage:
    session_id: int | None
    query: str
    token_budget: int
    tokens_used: int
    recent_episodes: list[Episode]
    relevant_episodes: list[tuple[Episode, float]]
    summaries: list[tuple[Summary, float]]
    entities: list[Entity]
    relationships: list[Relationship]
    omitted: list[Omitted] = field(default_factory=list)
    degraded: bool = False
    warnings: list[str] = field(default_factory=list)


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.omitted: list[Omitted] = []

    def admit(self, kind: str, item_id: int, tokens: int) -> bool:
        if self.used + tokens <= self.limit:
            self.used += tokens
            return True
        self.omitted.append(Omitted(kind, item_id, tokens))
        return False


class ContextService:
    def __init__(self, store: Store, search: SearchService) -> None:
        self._store = store
        self._search = search

    async def build(
        self, query: str, session_id: int | None, token_budget: int, recent_episodes: int = 5,
        relevant_limit: int = 10, ranker: str | None = None, owner: Owner = Owner(),
    ) -> ContextPackage:
        """With ``owner`` the relevant memory comes from all of that user's (agent's) sessions, and
        ``session_id`` may be left out (then there are no recent episodes); the entities are the
        owner's and the global ones."""
        check_text(query, "query", maximum=MAX_QUERY)
        check_limit(token_budget, "tokenBudget", maximum=MAX_TOKEN_BUDGET)
        if not 0 <= recent_episodes <= MAX_RECENT_EPISODES:
            raise Invalid(f"recentEpisodes must be between 0 and {MAX_RECENT_EPISODES}", field="recentEpisodes")
        session = None
        if session_id is None and not owner:
            raise Invalid("sessionId or userId/agentId is required", field="sessionId")
        if session_id is not None and (session := await self._store.sessions.get(session_id)) is None:
            raise NotFound(f"session {session_id} does not exist", field="sessionId")
        budget = _Budget(token_budget)

        recent = await self._store.episodes.recent(session_id, recent_episodes) \
            if recent_episodes and session_id is not None else []
        kept_recent = [e for e in recent if budget.admit("episode", e.id, episode_tokens(e))]
        seen = {e.id for e in recent}

        found = await self._search.search(SearchQuery(
            query=query, limit=relevant_limit + len(seen), session_id=session_id,
            sources=(EPISODES.name, SUMMARIES.name), ranker=ranker, owner=owner,
        ))
        relevant: list[tuple[Episode, float]] = []
        summaries: list[tuple[Summary, float]] = []
        for hit in found.hits:
            if isinstance(hit.item, Episode):
                if hit.item.id in seen or len(relevant) >= relevant_limit:
                    continue
                seen.add(hit.item.id)
                if budget.admit("episode", hit.item.id, episode_tokens(hit.item)):
                    relevant.append((hit.item, hit.score))
            elif isinstance(hit.item, Summary):
                if budget.admit("summary", hit.item.id, summary_tokens(hit.item)):
                    summaries.append((hit.item, hit.score))

        texts = [query] + [e.text for e in kept_recent] + [e.text for e, _ in relevant]
        texts += [s.content for s, _ in summaries]
        entities: list[Entity] = []
        user = owner.user_id or (session.user_id if session is not None else None)
        for entity in await self._store.entities.mentioned_in(texts, MAX_ENTITIES, user):
            if budget.admit("entity", entity.id, estimate_tokens(entity.text)):
                entities.append(entity)
        relationships = await self._relationships_among(entities, budget)

        return ContextPackage(
            session_id=session_id, query=query, token_budget=token_budget, tokens_used=budget.used,
            recent_episodes=sorted(kept_recent, key=lambda e: (e.created_at, e.id)),
            relevant_episodes=relevant, summaries=summaries, entities=entities,
            relationships=relationships, omitted=budget.omitted, degraded=found.degraded,
            warnings=found.warnings,
        )

    async def _relationships_among(self, entities: list[Entity], budget: _Budget) -> list[Relationship]:
        """Edges touching the admitted entities (each once), while the budget lasts."""
        names = {e.id: e.name for e in entities}
        seen: set[int] = set()
        kept: list[Relationship] = []
        for entity in entities:
            for rel in await self._store.entities.relationships_of(entity.id, "both"):
                if rel.id in seen:
                    continue
                seen.add(rel.id)
                text = f"{names.get(rel.from_id, rel.from_id)} {rel.label} {names.get(rel.to_id, rel.to_id)}"
                if budget.admit("relationship", rel.id, estimate_tokens(text)):
                    kept.append(rel)
        return kept
