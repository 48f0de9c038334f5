"""Hybrid retrieval: the vector leg and the keyword leg, fused by a swappable ranker.

The legs run concurrently. Either may fail on its own: with the embedder or the vector index
down the search answers from the keyword leg and says so (``degraded``), so an assistant keeps a
memory even while its embeddings are unavailable.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from domain.errors import DomainError, Invalid, NotFound
from domain.keywords import recall_query
from domain.limits import MAX_QUERY, MAX_SEARCH_LIMIT
from domain.models import Entity, Episode, Summary, parse_timestamp
from domain.ranking import MAX_CONTEXT_WINDOW, SOURCES, Candidate, Context, Key, LegHit, RankingRequest
from domain.services import check_limit, check_owner, check_session_owner, check_text
from domain.filters import MetadataFilter
from domain.freshness import ReadYourWrites
from domain.outbox import OutboxScope
from domain.models import Owner
from domain.vectors import VectorFilter, index_part
from ports.embedder import Embedder
from domain.record_kinds import EPISODES, KINDS
from domain.reranking import DEFAULT_DEPTH, reranked
from domain.relevance import DEFAULT_FLOOR, cosine, cosine_scale, relevance_of
from ports.store import Store
from ports.ranker import Ranker
from ports.reranker import Reranker
from ports.vector_index import VectorIndex

LEG_DEPTH = 3  # each leg fetches this many times max(limit, STABLE_LIMIT)
# The ranker is asked for this many times max(limit, STABLE_LIMIT), for hits below the floor to leave room.
FLOOR_DEPTH = 2
# Up to this limit the first k hits do not depend on the limit asked for: the legs fetch and the
# ranker ranks as deep as for STABLE_LIMIT hits. Fused scores are z-scored over the candidates,
# so a shallower search (a smaller limit) would score them on another spread and could order its
# top k otherwise than a deeper one: asking for 10 would not give the first 10 of asking for 20.
STABLE_LIMIT = 20
# Context is loaded around the candidates either leg ranks this high: a hit deeper in both legs is
# too weak to lift its neighbours into an answer, and loading around all of them doubled the cost.
CONTEXT_DEPTH = 20


def ranker_floor(ranker: Ranker) -> float:
    """The relevance below which a ranker's hits are not returned by default: its own
    ``relevance_floor`` when it declares one (a plugin may), else ``DEFAULT_FLOOR``."""
    floor = getattr(ranker, "relevance_floor", None)
    return DEFAULT_FLOOR if floor is None else min(1.0, max(0.0, float(floor)))


class RankerLookup(Protocol):
    def get(self, name: str) -> Ranker:
        """The ranker called ``name``; an unknown name raises ``Invalid`` (field ``ranker``)."""
        ...


@dataclass(frozen=True, slots=True)
class LegInfo:
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class SearchHit:
    source: str
    item: Episode | Entity | Summary
    score: float
    vector: LegInfo | None
    keyword: LegInfo | None
    relevance: float = 0.0
    """0–1 on the fixed scale of ``domain.relevance``; ``score`` is the ranker's, for ordering."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[SearchHit]
    ranker: str
    degraded: bool
    warnings: list[str] = field(default_factory=list)
    pending: int = 0
    """Records of the searched scope still waiting for their embedding: found by keywords only."""
    floor: float = 0.0
    """The relevance below which hits were left out."""


@dataclass(frozen=True, slots=True)
class SearchQuery:
    query: str
    limit: int = 10
    session_id: int | None = None
    sources: Sequence[str] = (EPISODES.name,)
    ranker: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    owner: Owner = Owner()
    """Search every session of this user / agent (and their entities: ``user_id`` only)."""
    metadata: MetadataFilter = MetadataFilter()
    min_score: float | None = None
    """Hits whose relevance (0–1, ``domain.relevance``) is below this are dropped; ``None``: the
    ranker's ``relevance_floor`` (``DEFAULT_FLOOR`` when it declares none); 0 keeps every hit."""
    read_your_writes: bool = True
    """Embed the scope's waiting records before searching (when the service is set up to)."""


# When part of a metadata filter cannot run inside the vector index, the vector leg fetches this
# many times deeper and the rest is checked on the loaded records.
OVERFETCH = 4


class SearchService:
    def __init__(
        self, store: Store, index: VectorIndex, embedder: Embedder, rankers: RankerLookup,
        default_ranker: str, observe_leg: Callable[[str, float], None] | None = None,
        fresh: ReadYourWrites | None = None, reranker: Reranker | None = None, rerank_depth: int = DEFAULT_DEPTH,
        query_timeout: float | None = None,
    ) -> None:
        self._store = store
        self._index = index
        self._embedder = embedder
        self._rankers = rankers
        self._default = default_ranker
        self.vector_seconds = 0.0  # read by metrics
        self.keyword_seconds = 0.0
        # Called with ("vector" | "keyword", seconds) after each leg: the composition root hands
        # the metrics' observer in here when it builds the service.
        self.observe_leg = observe_leg
        # Embeds the searched scope's waiting records first and counts what still waits (``pending``);
        # None: neither (a store with no outbox to read, or a caller that does not want it).
        self.fresh = fresh
        # The longest a search waits for its query's vector (None: as long as the embedder takes);
        # past it the search answers from the keyword leg, degraded, instead of hanging with the
        # model (a stalled in-process model has no HTTP timeout of its own).
        self.query_timeout = query_timeout
        # Optional: reorders the ranker's first ``rerank_depth`` hits (``domain.reranking``).
        self.reranker = reranker
        self.rerank_depth = max(1, rerank_depth)

    async def search(self, q: SearchQuery) -> SearchResult:
        check_text(q.query, "query", maximum=MAX_QUERY)
        check_limit(q.limit, maximum=MAX_SEARCH_LIMIT)
        sources = tuple(dict.fromkeys(q.sources)) or (EPISODES.name,)
        for source in sources:
            if source not in SOURCES:
                raise Invalid(f"unknown source {source!r}; use {', '.join(SOURCES)}", field="sources")
        if q.since and q.until and q.since > q.until:
            raise Invalid("since must not be after until", field="since")
        check_owner(q.owner)
        if q.min_score is not None and not (math.isfinite(q.min_score) and 0.0 <= q.min_score <= 1.0):
            raise Invalid("minScore must be between 0 and 1 (the relevance scale)", field="minScore")
        if q.session_id is not None:
            session = await self._store.sessions.get(q.session_id)
            if session is None:
                raise NotFound(f"session {q.session_id} does not exist", field="sessionId")
            check_session_owner(session, q.owner)
        ranker = self._rankers.get(q.ranker or self._default)
        deep_as = max(q.limit, STABLE_LIMIT)
        depth = deep_as * LEG_DEPTH
        inside, outside = index_part(q.metadata)
        (vector_hits, query_vector, warnings, pending), keyword_hits = await asyncio.gather(
            self._timed("vector", self._vector_leg(q, sources, depth * (OVERFETCH if outside else 1), inside)),
            self._timed("keyword", self._keyword_leg(q, sources, depth)),
        )
        candidates = await self._load(vector_hits, keyword_hits)
        if q.metadata:  # exact, on the records: covers what the index could not test
            candidates = {k: c for k, c in candidates.items() if q.metadata.matches(c.item.metadata)}
            vector_hits, keyword_hits = _kept(vector_hits, candidates), _kept(keyword_hits, candidates)
        neighbours: dict[Key, Context] = {}
        window = min(ranker.context_window, MAX_CONTEXT_WINDOW)
        if window > 0 and candidates:
            near_top = {hit.key for leg in (vector_hits, keyword_hits) for hit in leg if hit.rank <= CONTEXT_DEPTH}
            neighbours = await self._with_neighbours(candidates, near_top, window, q.since, q.until, q.metadata)
        if ranker.needs_vectors and candidates and query_vector is not None:
            candidates = await self._with_vectors(candidates)
        # Ranked deeper than the limit: a hit below the relevance floor leaves its place to the next
        # one above it, and a hit a reranker lifts can come from below the cut.
        depth = deep_as * FLOOR_DEPTH
        # A reranker reorders its first RERANK_DEPTH hits (at least as many as asked for, and as
        # many for any limit up to STABLE_LIMIT); the rest follow in the ranker's order.
        rerank = 0 if self.reranker is None else max(self.rerank_depth, deep_as)
        depth = max(depth, rerank)
        request = RankingRequest(
            query=q.query, query_vector=query_vector, vector_hits=vector_hits, keyword_hits=keyword_hits,
            candidates=candidates, limit=depth, now=datetime.now(UTC), neighbours=neighbours,
        )
        vec = {h.key: LegInfo(h.rank, h.score) for h in vector_hits}
        kw = {h.key: LegInfo(h.rank, h.score) for h in keyword_hits}
        ranked = [hit for hit in ranker.rank(request) if hit.key in candidates][:depth]
        degraded = bool(warnings)  # the vector leg's trouble; a reranker's is a warning only
        if self.reranker is not None:
            head, tail = ranked[:rerank], ranked[rerank:]
            head, trouble = await reranked(
                self.reranker, q.query, head, {h.key: getattr(candidates[h.key].item, "text", "") for h in head})
            ranked = head + tail
            warnings = warnings + [trouble] if trouble else warnings
        # The anchors' relevance too: a neighbour a ranker lifted inherits a share of it.
        judged = {hit.key for hit in ranked} | neighbours.keys()
        relevance = relevance_of(
            q.query, {key: getattr(candidates[key].item, "text", "") for key in judged},
            await self._cosines(judged, vec, query_vector),
            {key: (*around.before, *around.after) for key, around in neighbours.items()},
            cosine_scale(self._embedder.model),
        )
        floor = q.min_score if q.min_score is not None else ranker_floor(ranker)
        hits = [
            SearchHit(hit.key[0], candidates[hit.key].item, hit.score, vec.get(hit.key), kw.get(hit.key),
                      relevance[hit.key])
            for hit in ranked if _kept_at(relevance[hit.key], floor)
        ][: q.limit]
        return SearchResult(hits, ranker.name, degraded, warnings, pending, floor)

    async def _timed(self, leg: str, work: Awaitable):
        started = time.perf_counter()
        try:
            return await work
        finally:
            seconds = time.perf_counter() - started
            if leg == "vector":
                self.vector_seconds += seconds
            else:
                self.keyword_seconds += seconds
            if self.observe_leg is not None:
                self.observe_leg(leg, seconds)

    async def _vector_leg(self, q: SearchQuery, sources, depth: int, metadata: tuple = ()):
        # The scope's waiting records are embedded while the query is, and searched after both.
        catching_up = asyncio.ensure_future(self._catch_up(q, sources))
        try:
            async with asyncio.timeout(self.query_timeout) as deadline:
                vectors = await self._embedder.embed_query([q.query])
        except DomainError as exc:
            return [], None, [f"embedder unavailable, keyword results only: {exc.message}"], await catching_up
        except TimeoutError as exc:
            why = (f"embedder gave no vector within {self.query_timeout:g} s" if deadline.expired()
                   else f"embedder unavailable: {exc or 'timed out'}")  # its own, which the port should wrap
            return [], None, [f"{why}, keyword results only"], await catching_up
        pending = await catching_up
        query_vector = tuple(vectors[0])
        scored: list[tuple[float, Key]] = []
        warnings: list[str] = []
        for source in sources:
            in_sessions = KINDS[source].in_sessions
            flt = VectorFilter(session_id=q.session_id if in_sessions else None, since=q.since, until=q.until,
                               user_id=q.owner.user_id, agent_id=q.owner.agent_id if in_sessions else None,
                               metadata=metadata)
            try:
                found = await self._index.search(source, query_vector, depth, None if flt.is_empty else flt)
            except DomainError as exc:
                warnings.append(f"vector index unavailable for {source}, keyword results only: {exc.message}")
                continue
            scored.extend((hit.score, (source, hit.id)) for hit in found)
        scored.sort(key=lambda s: (-s[0], s[1]))
        hits = [LegHit(key, score, rank) for rank, (score, key) in enumerate(scored, start=1)]
        return hits, query_vector, warnings, pending

    async def _catch_up(self, q: SearchQuery, sources) -> int:
        if self.fresh is None:
            return 0
        scope = OutboxScope(q.session_id, q.owner.user_id, q.owner.agent_id)
        return await self.fresh.catch_up(sources, scope, embed=q.read_your_writes)

    async def _keyword_leg(self, q: SearchQuery, sources, depth: int) -> list[LegHit]:
        query = recall_query(q.query)
        scored: list[tuple[float, Key]] = []
        for source in sources:
            found = await self._store.keywords.search(
                source, query, depth, session_id=q.session_id, since=q.since, until=q.until, owner=q.owner,
                metadata=q.metadata or None,
            )
            scored.extend((hit.score, (source, hit.item.id)) for hit in found)
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [LegHit(key, score, rank) for rank, (score, key) in enumerate(scored, start=1)]

    async def _load(self, *legs: Sequence[LegHit]) -> dict[Key, Candidate]:
        wanted: dict[str, list[int]] = {s: [] for s in SOURCES}
        for leg in legs:
            for hit in leg:
                wanted[hit.key[0]].append(hit.key[1])
        candidates: dict[Key, Candidate] = {}
        for source, ids in wanted.items():
            if not ids:
                continue
            for item in await KINDS[source].load(self._store, list(dict.fromkeys(ids))):
                key = (source, item.id)
                candidates[key] = Candidate(key, item, parse_timestamp(item.created_at))
        return candidates

    async def _with_neighbours(
        self, candidates: dict[Key, Candidate], near_top: set[Key], window: int,
        since: datetime | None, until: datetime | None, metadata: MetadataFilter = MetadataFilter(),
    ) -> dict[Key, Context]:
        """Load the session neighbours of the episode candidates in ``near_top`` into ``candidates``
        (in place) and answer who neighbours whom. A neighbour outside the search's time range
        stays out: the range is a filter, and context must not leak past it."""
        ids = [item_id for source, item_id in candidates if source == EPISODES.name and (source, item_id) in near_top]
        found = await self._store.episodes.neighbours(ids, window)
        missing = {i for around in found.values() for i in (*around.before, *around.after)
                   if (EPISODES.name, i) not in candidates}
        for episode in await self._store.episodes.get_many(sorted(missing)) if missing else ():
            key = (EPISODES.name, episode.id)
            moment = parse_timestamp(episode.created_at)
            if (since is None or moment >= since) and (until is None or moment <= until) and \
                    metadata.matches(episode.metadata):
                candidates[key] = Candidate(key, episode, moment)
        context: dict[Key, Context] = {}
        for episode_id, around in found.items():
            before, after = (tuple((EPISODES.name, i) for i in side if (EPISODES.name, i) in candidates)
                             for side in (around.before, around.after))
            context[(EPISODES.name, episode_id)] = Context(before=before, after=after)
        return context

    async def _cosines(self, keys: set[Key], vec: dict[Key, LegInfo], query_vector) -> dict[Key, float]:
        """The query's cosine with each of ``keys``: the vector leg's score where it ranked the
        record, else from the stored vector (none when the index cannot say)."""
        cosines = {key: vec[key].score for key in keys if key in vec}
        missing: dict[str, list[int]] = {}
        for source, item_id in keys - cosines.keys():
            missing.setdefault(source, []).append(item_id)
        if query_vector is None:
            return cosines
        for source, ids in missing.items():
            try:
                stored = await self._index.retrieve_vectors(source, ids)
            except DomainError:
                continue
            cosines.update({(source, item_id): cosine(query_vector, v) for item_id, v in stored.items()})
        return cosines

    async def _with_vectors(self, candidates: dict[Key, Candidate]) -> dict[Key, Candidate]:
        by_source: dict[str, list[int]] = {}
        for source, item_id in candidates:
            by_source.setdefault(source, []).append(item_id)
        out = dict(candidates)
        for source, ids in by_source.items():
            try:
                stored = await self._index.retrieve_vectors(source, ids)
            except DomainError:
                continue
            for item_id, vector in stored.items():
                c = candidates[(source, item_id)]
                out[c.key] = Candidate(c.key, c.item, c.created_at, tuple(vector))
        return out


def _kept_at(relevance: float, floor: float) -> bool:
    """A hit with no evidence at all (relevance 0) is kept only when the caller asks for every hit."""
    return floor == 0.0 or (relevance >= floor and relevance > 0.0)


def _kept(leg: Sequence[LegHit], candidates: dict[Key, Candidate]) -> list[LegHit]:
    """A leg without the hits the filter dropped, ranked again from 1."""
    kept = [hit for hit in leg if hit.key in candidates]
    return [LegHit(hit.key, hit.score, rank) for rank, hit in enumerate(kept, start=1)]
