"""The context package: what an assistant puts into its prompt for one turn.

It holds the most relevant episodes and summaries (memory), the turns next to those episodes
(their context), the session's most recent episodes (continuity), and the entities all of them
mention with their relationships (facts), deduplicated and cut to a token budget.

Relevance comes first: under a tight budget the turn that answers the query matters more than the
latest small talk. Items are admitted in this order: the relevant episodes and summaries best
first, then the recent episodes newest first, then the neighbours of the admitted relevant
episodes, then entities and relationships. Only hits at or above the search's relevance floor
are candidates, so nothing irrelevant pads the package. What is kept is then put in time order
(memory reads as a story, not as a ranking), and whatever did not fit is listed in ``omitted``
with the reason, so the caller knows what it is missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from domain.errors import Invalid, NotFound
from domain.limits import MAX_QUERY, MAX_RECENT_EPISODES, MAX_TOKEN_BUDGET
from domain.models import Entity, Episode, Owner, Relationship, Summary, utc_now
from domain.retrieval import SearchQuery, SearchService
from domain.services import check_limit, check_text
from domain.record_kinds import EPISODES, SUMMARIES
from ports.store import Store

CHARS_PER_TOKEN = 4
"""The token estimate where a record carries no ``tokenCount``: about 4 characters per token,
the usual figure for English text with BPE tokenizers (rounded up, plus 4 tokens of framing)."""

MAX_ENTITIES = 50
NEIGHBOUR_WINDOW = 1
"""Turns on each side of a relevant episode that come with it when they fit: the answer to a
question is often the next turn, and the question an answer replies to the one before."""


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) + 4


def episode_tokens(episode: Episode) -> int:
    return episode.token_count if episode.token_count is not None else estimate_tokens(episode.text)


def summary_tokens(summary: Summary) -> int:
    return summary.token_count if summary.token_count is not None else estimate_tokens(summary.content)


def _tokens(item: Episode | Summary) -> int:
    return episode_tokens(item) if isinstance(item, Episode) else summary_tokens(item)


@dataclass(frozen=True, slots=True)
class Omitted:
    """A record the package left out: ``role`` is why it was a candidate (``relevant``, ``recent``,
    ``neighbour``, ``mentioned``), ``reason`` why it is not in (``budget``: it did not fit in
    what was left, ``relevantLimit``: more relevant records than ``relevantLimit`` asked for)."""

    kind: str
    id: int
    tokens: int
    role: str = "relevant"
    reason: str = "budget"
    relevance: float | None = None


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
    neighbour_episodes: list[Episode] = field(default_factory=list)
    """Turns next to a kept relevant episode in its session: the question it answers, the reply."""
    relevance: dict[tuple[str, int], float] = field(default_factory=dict)
    """The 0–1 relevance of each kept relevant episode and summary, by (kind, id)."""
    pending: int = 0
    """Records of the scope still waiting for their embedding (see ``SearchResult.pending``)."""


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.omitted: list[Omitted] = []

    def admit(self, kind: str, item_id: int, tokens: int, role: str = "relevant",
              relevance: float | None = None) -> bool:
        if self.used + tokens <= self.limit:
            self.used += tokens
            return True
        self.omitted.append(Omitted(kind, item_id, tokens, role, "budget", relevance))
        return False


class ContextService:
    def __init__(self, store: Store, search: SearchService) -> None:
        self._store = store
        self._search = search

    async def build(
        self, query: str, session_id: int | None, token_budget: int, recent_episodes: int = 5,
        relevant_limit: int = 10, ranker: str | None = None, owner: Owner = Owner(), as_of: str | None = None,
        global_records: bool = True,
    ) -> ContextPackage:
        """With ``owner`` the relevant memory comes from all of that user's (agent's) sessions, and
        ``session_id`` may be left out (then there are no recent episodes); the entities and
        relationships are the user's (the owner's, else the session's) and, with
        ``global_records``, the global ones — nothing of another user is weighed against the
        budget, so none shows in ``tokens_used`` or ``omitted``. ``as_of`` (a canonical timestamp;
        default now): the relationships included are those valid at that moment
        (``Relationship.valid_at``)."""
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
        found = await self._search.search(SearchQuery(
            query=query, limit=relevant_limit + recent_episodes, session_id=session_id,
            sources=(EPISODES.name, SUMMARIES.name), ranker=ranker, owner=owner,
        ))
        recent = await self._store.episodes.recent(session_id, recent_episodes) \
            if recent_episodes and session_id is not None else []
        recent_ids = {e.id for e in recent}
        scores: dict[tuple[str, int], float] = {}
        relevance: dict[tuple[str, int], float] = {}
        relevant: list[Episode] = []
        summaries: list[Summary] = []
        taken = 0
        for hit in found.hits:  # best first
            key = ("episode" if isinstance(hit.item, Episode) else "summary", hit.item.id)
            if isinstance(hit.item, Episode) and hit.item.id in recent_ids:
                continue  # continuity holds it already; its place below says how relevant it is
            if taken >= relevant_limit:
                budget.omitted.append(Omitted(key[0], hit.item.id, _tokens(hit.item), "relevant", "relevantLimit",
                                              hit.relevance))
                continue
            taken += 1
            if budget.admit(key[0], hit.item.id, _tokens(hit.item), "relevant", hit.relevance):
                scores[key], relevance[key] = hit.score, hit.relevance
                (relevant if isinstance(hit.item, Episode) else summaries).append(hit.item)
        kept_recent = [e for e in sorted(recent, key=lambda e: (e.created_at, e.id), reverse=True)
                       if budget.admit("episode", e.id, episode_tokens(e), "recent")]
        neighbours = await self._neighbours(relevant, recent_ids | {e.id for e in relevant}, budget)

        texts = [query] + [e.text for e in (*kept_recent, *relevant, *neighbours)] + [s.content for s in summaries]
        entities: list[Entity] = []
        user = owner.user_id or (session.user_id if session is not None else None)
        # The store narrows the entities; their relationships are narrowed here, by the same rule.
        ours = lambda record: user is None or record.user_id == user or (  # noqa: E731
            global_records and record.user_id is None)
        for entity in await self._store.entities.mentioned_in(texts, MAX_ENTITIES, user, global_records):
            if budget.admit("entity", entity.id, estimate_tokens(entity.text), "mentioned"):
                entities.append(entity)
        relationships = await self._relationships_among(entities, budget, as_of or utc_now(), ours)

        in_time = lambda items: sorted(items, key=lambda x: (x.created_at, x.id))  # noqa: E731
        return ContextPackage(
            session_id=session_id, query=query, token_budget=token_budget, tokens_used=budget.used,
            recent_episodes=in_time(kept_recent),
            relevant_episodes=[(e, scores[("episode", e.id)]) for e in in_time(relevant)],
            summaries=[(x, scores[("summary", x.id)]) for x in in_time(summaries)], entities=entities,
            relationships=relationships, omitted=budget.omitted, degraded=found.degraded,
            warnings=found.warnings, neighbour_episodes=in_time(neighbours), relevance=relevance,
            pending=found.pending,
        )

    async def _neighbours(self, relevant: list[Episode], held: set[int], budget: _Budget) -> list[Episode]:
        """The turn before and the turn after each admitted relevant episode (the most relevant
        first), those not held already, while they fit."""
        if not relevant:
            return []
        around = await self._store.episodes.neighbours([e.id for e in relevant], NEIGHBOUR_WINDOW)
        wanted: list[int] = []
        for episode in relevant:
            sides = around.get(episode.id)
            if sides is None:
                continue
            for neighbour_id in (*sides.before[:NEIGHBOUR_WINDOW], *sides.after[:NEIGHBOUR_WINDOW]):
                if neighbour_id not in held and neighbour_id not in wanted:
                    wanted.append(neighbour_id)
        by_id = {e.id: e for e in await self._store.episodes.get_many(wanted)} if wanted else {}
        kept = []
        for neighbour_id in wanted:
            episode = by_id.get(neighbour_id)
            if episode is not None and budget.admit("episode", episode.id, episode_tokens(episode), "neighbour"):
                kept.append(episode)
        return kept

    async def _relationships_among(self, entities: list[Entity], budget: _Budget, as_of: str,
                                   ours: Callable[[Relationship], bool]) -> list[Relationship]:
        """Edges touching the admitted entities valid at ``as_of`` (each once) that are ``ours``,
        while the budget lasts."""
        names = {e.id: e.name for e in entities}
        seen: set[int] = set()
        kept: list[Relationship] = []
        for entity in entities:
            for rel in await self._store.entities.relationships_of(entity.id, "both", as_of):
                if rel.id in seen or not ours(rel):
                    continue
                seen.add(rel.id)
                text = f"{names.get(rel.from_id, rel.from_id)} {rel.label} {names.get(rel.to_id, rel.to_id)}"
                if budget.admit("relationship", rel.id, estimate_tokens(text)):
                    kept.append(rel)
        return kept
