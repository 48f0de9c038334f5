"""The VectorIndex contract, run over every adapter (in-memory, Qdrant Edge, qdrant-client local
mode, and a real Qdrant server when QDRANT_URL is set)."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.memory.vector_index import InMemoryVectorIndex
from adapters.qdrant.edge import QdrantEdgeIndex
from adapters.qdrant.server import QdrantServerIndex
from domain.errors import VectorIndexError
from domain.models import format_timestamp
from domain.vectors import PointBatch, VectorFilter, VectorPoint, cosine_similarity, encode_vector, point_payload
from ports.vector_index import CollectionAliases, VectorIndex

DIM = 8
# An index may keep vectors at the store's own precision, float16 (domain.vectors.encode_vector, as
# Qdrant Edge does): a unit vector's components move by up to ~5e-4, a cosine by about as much.
PRECISION = 1e-3
QDRANT_URL = os.environ.get("QDRANT_URL")
needs_server = pytest.mark.skipif(not QDRANT_URL, reason="QDRANT_URL is not set: no real Qdrant server")
T0 = datetime(2026, 1, 1, tzinfo=UTC)

Opener = Callable[[], VectorIndex]


def _openers(tmp_path: Path) -> dict[str, Opener]:
    """How to open each adapter; calling an opener twice opens the same location again."""
    return {
        "memory": InMemoryVectorIndex,
        "edge": lambda: QdrantEdgeIndex(tmp_path / "qdrant"),
        "server-local": QdrantServerIndex.in_memory,
        "server": lambda: QdrantServerIndex.from_url(QDRANT_URL or ""),
    }


ALL = [
    pytest.param("memory"),
    pytest.param("edge"),
    pytest.param("server-local"),
    pytest.param("server", marks=needs_server),
]
PERSISTENT = [pytest.param("edge"), pytest.param("server", marks=needs_server)]


@pytest.fixture
def collection() -> str:
    # Unique per test so a shared real server never mixes runs.
    return f"test_{uuid.uuid4().hex[:12]}"


async def _drop_from_real_server(collection: str) -> None:
    """Leave nothing behind on a shared Qdrant server."""
    from qdrant_client import AsyncQdrantClient

    client = AsyncQdrantClient(url=QDRANT_URL)
    await client.delete_collection(collection)
    await client.close()


async def _opener(request: pytest.FixtureRequest, tmp_path: Path, collection: str) -> AsyncIterator[Opener]:
    name = request.param
    yield _openers(tmp_path)[name]
    if name == "server":
        await _drop_from_real_server(collection)


@pytest.fixture(params=ALL)
async def opener(request: pytest.FixtureRequest, tmp_path: Path, collection: str) -> AsyncIterator[Opener]:
    async for value in _opener(request, tmp_path, collection):
        yield value


@pytest.fixture(params=PERSISTENT)
async def persistent_opener(
    request: pytest.FixtureRequest, tmp_path: Path, collection: str
) -> AsyncIterator[Opener]:
    async for value in _opener(request, tmp_path, collection):
        yield value


@pytest.fixture
async def index(opener: Opener, collection: str) -> AsyncIterator[VectorIndex]:
    opened = opener()
    await opened.ensure_collection(collection, DIM)
    yield opened
    await opened.close()


def unit(axis: int, tilt: float = 0.0, tilt_axis: int = 1) -> list[float]:
    vector = [0.0] * DIM
    vector[axis] = 1.0
    vector[tilt_axis] += tilt
    return vector


def point(pid: int, vector: list[float], session: int | None = 1, at: datetime = T0) -> VectorPoint:
    return VectorPoint(pid, vector, point_payload(format_timestamp(at), session))


def ids(hits: list) -> list[int]:
    return [hit.id for hit in hits]


async def test_ensuring_a_collection_twice_keeps_its_points(index: VectorIndex, collection: str) -> None:
    await index.upsert(collection, [point(1, unit(0))])
    await index.ensure_collection(collection, DIM)
    assert await index.count(collection) == 1


async def test_ensuring_a_collection_with_another_size_names_both_sizes(
    index: VectorIndex, collection: str
) -> None:
    with pytest.raises(VectorIndexError) as raised:
        await index.ensure_collection(collection, DIM * 2)
    message = raised.value.message
    assert collection in message and str(DIM) in message and str(DIM * 2) in message


async def test_search_returns_best_first_with_cosine_scores(index: VectorIndex, collection: str) -> None:
    points = [point(1, unit(0)), point(2, unit(0, tilt=1.0)), point(3, unit(1)), point(4, unit(2, tilt=-0.5))]
    await index.upsert(collection, points)
    query = unit(0, tilt=0.2)
    hits = await index.search(collection, query, limit=10)
    expected = sorted(points, key=lambda p: -cosine_similarity(query, p.vector))
    assert ids(hits) == [p.id for p in expected]
    for hit, want in zip(hits, expected, strict=True):
        assert hit.score == pytest.approx(cosine_similarity(query, want.vector), abs=PRECISION)


async def test_upserting_the_same_id_replaces_the_point(index: VectorIndex, collection: str) -> None:
    await index.upsert(collection, [point(1, unit(0), session=1)])
    await index.upsert(collection, [point(1, unit(3), session=2)])
    assert await index.count(collection) == 1
    hits = await index.search(collection, unit(3), limit=1)
    assert ids(hits) == [1] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert ids(await index.search(collection, unit(3), 5, VectorFilter(session_id=1))) == []


async def test_search_returns_at_most_limit_hits(index: VectorIndex, collection: str) -> None:
    await index.upsert(collection, [point(i, unit(i % DIM, tilt=i / 10)) for i in range(1, 21)])
    assert len(await index.search(collection, unit(0), limit=5)) == 5


async def test_searching_an_empty_collection_finds_nothing(index: VectorIndex, collection: str) -> None:
    assert await index.search(collection, unit(0), limit=5) == []


async def test_search_filtered_by_session_returns_only_that_session(
    index: VectorIndex, collection: str
) -> None:
    await index.upsert(collection, [point(i, unit(0, tilt=i / 10), session=i % 3) for i in range(1, 13)])
    hits = await index.search(collection, unit(0), limit=20, filter=VectorFilter(session_id=2))
    assert sorted(ids(hits)) == [2, 5, 8, 11]


async def test_search_filtered_by_time_keeps_points_within_since_and_until(
    index: VectorIndex, collection: str
) -> None:
    points = [point(i, unit(0, tilt=i / 10), at=T0 + timedelta(days=i)) for i in range(1, 8)]
    await index.upsert(collection, points)
    since, until = T0 + timedelta(days=3), T0 + timedelta(days=5)
    assert sorted(ids(await index.search(collection, unit(0), 20, VectorFilter(since=since)))) == [
        3,
        4,
        5,
        6,
        7,
    ]
    assert sorted(ids(await index.search(collection, unit(0), 20, VectorFilter(until=until)))) == [
        1,
        2,
        3,
        4,
        5,
    ]
    both = VectorFilter(session_id=1, since=since, until=until)
    assert sorted(ids(await index.search(collection, unit(0), 20, both))) == [3, 4, 5]


async def test_points_without_a_session_never_match_a_session_filter(
    index: VectorIndex, collection: str
) -> None:
    await index.upsert(collection, [point(1, unit(0), session=None), point(2, unit(0), session=7)])
    assert ids(await index.search(collection, unit(0), 5, VectorFilter(session_id=7))) == [2]


async def test_score_threshold_drops_weaker_hits(index: VectorIndex, collection: str) -> None:
    await index.upsert(collection, [point(1, unit(0)), point(2, unit(0, tilt=1.0)), point(3, unit(1))])
    hits = await index.search(collection, unit(0), limit=10, score_threshold=0.5)
    assert ids(hits) == [1, 2] and all(hit.score >= 0.5 for hit in hits)


async def test_deleting_ids_removes_them_and_unknown_ids_are_a_no_op(
    index: VectorIndex, collection: str
) -> None:
    await index.upsert(collection, [point(1, unit(0)), point(2, unit(1)), point(3, unit(2))])
    await index.delete(collection, [2, 999])
    await index.delete(collection, [])
    assert await index.count(collection) == 2
    assert 2 not in ids(await index.search(collection, unit(1), limit=10))


async def test_deleting_by_session_removes_only_that_session(index: VectorIndex, collection: str) -> None:
    await index.upsert(collection, [point(i, unit(i % DIM), session=i % 2) for i in range(1, 11)])
    await index.delete_by_filter(collection, VectorFilter(session_id=1))
    assert await index.count(collection) == 5
    assert all(i % 2 == 0 for i in ids(await index.search(collection, unit(0), limit=20)))


async def test_deleting_by_an_empty_filter_is_refused(index: VectorIndex, collection: str) -> None:
    await index.upsert(collection, [point(1, unit(0))])
    with pytest.raises(VectorIndexError):
        await index.delete_by_filter(collection, VectorFilter())
    assert await index.count(collection) == 1


async def test_count_follows_upserts_and_deletes(index: VectorIndex, collection: str) -> None:
    assert await index.count(collection) == 0
    await index.upsert(collection, [point(i, unit(i % DIM)) for i in range(1, 6)])
    await index.upsert(collection, [])
    assert await index.count(collection) == 5


async def test_retrieve_vectors_returns_unit_vectors_of_known_ids(
    index: VectorIndex, collection: str
) -> None:
    await index.upsert(collection, [point(1, [3.0, 4.0] + [0.0] * (DIM - 2)), point(2, unit(1))])
    vectors = await index.retrieve_vectors(collection, [1, 2, 404])
    assert set(vectors) == {1, 2}
    assert vectors[1][:2] == pytest.approx([0.6, 0.8], abs=PRECISION) and len(vectors[1]) == DIM


async def test_a_vector_of_the_wrong_size_is_refused(index: VectorIndex, collection: str) -> None:
    with pytest.raises(VectorIndexError):
        await index.upsert(collection, [point(1, [1.0, 0.0])])


async def test_using_a_collection_that_was_never_ensured_raises(index: VectorIndex) -> None:
    with pytest.raises(VectorIndexError):
        await index.search("never_created_here", unit(0), limit=1)


async def test_health_is_none_while_open(index: VectorIndex) -> None:
    assert await index.health() is None


async def test_points_survive_closing_and_reopening(persistent_opener: Opener, collection: str) -> None:
    opener = persistent_opener
    first = opener()
    await first.ensure_collection(collection, DIM)
    await first.upsert(collection, [point(1, unit(0)), point(2, unit(1), session=2)])
    await first.close()
    second = opener()
    await second.ensure_collection(collection, DIM)
    assert await second.count(collection) == 2
    assert ids(await second.search(collection, unit(1), 1, VectorFilter(session_id=2))) == [2]
    with pytest.raises(VectorIndexError):
        await second.ensure_collection(collection, DIM + 1)
    await second.close()


async def test_every_adapter_finds_the_same_neighbours(tmp_path: Path, collection: str) -> None:
    rng = random.Random(7)
    dim, n = 32, 300
    points = [
        VectorPoint(i, [rng.gauss(0, 1) for _ in range(dim)], point_payload(format_timestamp(T0), i % 4))
        for i in range(1, n + 1)
    ]
    queries = [[rng.gauss(0, 1) for _ in range(dim)] for _ in range(10)]
    results: dict[str, list[list[tuple[int, float]]]] = {}
    openers = _openers(tmp_path)
    names = ["memory", "edge", "server-local"] + (["server"] if QDRANT_URL else [])
    for name in names:
        opened = openers[name]()
        try:
            await opened.ensure_collection(collection, dim)
            await opened.upsert(collection, points)
            found = []
            for q in queries:
                found.append([(h.id, h.score) for h in await opened.search(collection, q, 10)])
                session = await opened.search(collection, q, 10, VectorFilter(session_id=3))
                found.append([(h.id, h.score) for h in session])
            results[name] = found
        finally:
            await opened.close()
    if QDRANT_URL:
        await _drop_from_real_server(collection)
    reference = results["memory"]
    # Per query: every point, then only session 3's (a hit from another session has no cosine to match).
    in_session = [p for p in points if p.id % 4 == 3]
    exact = [{p.id: cosine_similarity(q, p.vector) for p in among} for q in queries for among in (points, in_session)]
    for name, found in results.items():
        for got, want, cosine in zip(found, reference, exact, strict=True):
            assert len(got) == len(want), name
            assert len({pid for pid, _ in got}) == len(got), name  # no point twice
            assert all(pid in cosine for pid, _ in got), name
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=PRECISION), name
            # The same neighbours in the same order, but for two whose cosines are within the
            # precision an index keeps (they may trade places).
            assert [cosine[pid] for pid, _ in got] == pytest.approx([s for _, s in want], abs=PRECISION), name


# ---- Qdrant Edge only: opening its directory ---------------------------------------------------


async def test_opening_an_edge_directory_that_is_in_use_says_it_is_locked(tmp_path: Path) -> None:
    first = QdrantEdgeIndex(tmp_path / "qdrant")
    await first.ensure_collection("episodes", DIM)
    second = QdrantEdgeIndex(tmp_path / "qdrant")
    try:
        with pytest.raises(VectorIndexError, match="locked"):
            await second.ensure_collection("episodes", DIM)
    finally:
        await second.close()
        await first.close()


async def test_opening_an_edge_path_that_is_not_a_directory_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    index = QdrantEdgeIndex(blocker)
    try:
        with pytest.raises(VectorIndexError, match="not-a-dir"):
            await index.ensure_collection("episodes", DIM)
    finally:
        await index.close()


async def test_edge_search_stays_exact_after_the_optimizer_ran(tmp_path: Path) -> None:
    rng = random.Random(3)
    index = QdrantEdgeIndex(tmp_path / "qdrant", optimize_every=100)
    points = [
        VectorPoint(i, [rng.gauss(0, 1) for _ in range(DIM)], point_payload(format_timestamp(T0), 1))
        for i in range(1, 1001)
    ]
    try:
        await index.ensure_collection("episodes", DIM)
        for start in range(0, len(points), 100):
            await index.upsert("episodes", points[start : start + 100])
        await index.delete("episodes", [p.id for p in points[:100]])
        assert await index.count("episodes") == 900
        query = points[500].vector
        hits = await index.search("episodes", query, 5)
        best = sorted(points[100:], key=lambda p: -cosine_similarity(query, p.vector))[:5]
        assert ids(hits) == [p.id for p in best]
    finally:
        await index.close()


async def test_an_edge_collection_from_an_earlier_run_is_usable_without_ensuring_it(tmp_path: Path) -> None:
    first = QdrantEdgeIndex(tmp_path / "qdrant")
    await first.ensure_collection("entities", DIM)
    await first.upsert("entities", [point(1, unit(0), session=None)])
    await first.close()
    second = QdrantEdgeIndex(tmp_path / "qdrant")
    try:
        assert ids(await second.search("entities", unit(0), 1)) == [1]
    finally:
        await second.close()


# ---- generations: listing, building, dropping, verifying ----------------------------------------


async def _batches(points: list[VectorPoint], size: int = 3):
    for start in range(0, len(points), size):
        chunk = points[start:start + size]
        yield PointBatch([p.id for p in chunk], [p.payload for p in chunk],
                         b"".join(encode_vector(p.vector) for p in chunk), DIM)


async def test_a_built_collection_holds_the_streamed_points_and_serves(index: VectorIndex, collection: str) -> None:
    built = f"{collection}_g2"
    points = [point(i, unit(i % DIM, 0.1 * i)) for i in range(1, 11)]
    await index.build_collection(built, DIM, _batches(points))
    try:
        assert await index.count(built) == 10
        assert await index.point_ids(built) == list(range(1, 11))
        assert ids(await index.search(built, unit(3, 0.3), 1)) == [3]
        assert built in await index.collections() and collection in await index.collections()
        await index.upsert(built, [point(11, unit(0))])  # a built collection takes writes
        assert await index.count(built) == 11
    finally:
        await index.drop_collection(built)
    assert built not in await index.collections()


async def test_building_over_an_existing_collection_is_refused(index: VectorIndex, collection: str) -> None:
    with pytest.raises(VectorIndexError, match=collection):
        await index.build_collection(collection, DIM, _batches([point(1, unit(0))]))


async def test_dropping_a_collection_removes_it_and_dropping_again_is_a_no_op(
    index: VectorIndex, collection: str
) -> None:
    await index.upsert(collection, [point(1, unit(0))])
    await index.drop_collection(collection, keep=True)
    await index.drop_collection(collection)
    assert collection not in await index.collections()
    with pytest.raises(VectorIndexError):
        await index.count(collection)


async def test_point_ids_list_every_point_ascending(index: VectorIndex, collection: str) -> None:
    await index.upsert(collection, [point(i, unit(i % DIM)) for i in (5, 2, 9)])
    await index.delete(collection, [2])
    assert await index.point_ids(collection) == [5, 9]


async def test_a_small_collection_needs_no_rebuild_and_the_disk_has_room(index: VectorIndex, collection: str) -> None:
    await index.upsert(collection, [point(1, unit(0))])
    assert await index.rebuild_advised(collection) is False
    assert index.disk_low() is None


async def test_a_large_edge_shard_is_advised_for_rebuild_instead_of_built_in_place(tmp_path: Path) -> None:
    index = QdrantEdgeIndex(tmp_path / "qdrant", optimize_every=10, inline_optimize_points=20)
    try:
        await index.ensure_collection("episodes", DIM)
        await index.upsert("episodes", [point(i, unit(i % DIM, 0.01 * i)) for i in range(1, 31)])
        assert await index.rebuild_advised("episodes") is True
    finally:
        await index.close()


async def test_an_edge_shard_dropped_with_keep_is_moved_aside_not_deleted(tmp_path: Path) -> None:
    index = QdrantEdgeIndex(tmp_path / "qdrant")
    try:
        await index.ensure_collection("episodes", DIM)
        await index.drop_collection("episodes", keep=True)
        aside = list((tmp_path / "qdrant" / ".aside").iterdir())
        assert [p.name.split("-")[0] for p in aside] == ["episodes"]
        assert (aside[0] / "edge_config.json").exists()
        assert await index.collections() == []
    finally:
        await index.close()


async def test_edge_writes_refuse_below_the_disk_reserve_and_say_disk_low(tmp_path: Path) -> None:
    index = QdrantEdgeIndex(tmp_path / "qdrant", disk_reserve_bytes=2**62)  # more than any disk has
    try:
        with pytest.raises(VectorIndexError, match="disk low"):
            await index.ensure_collection("episodes", DIM)
        assert "disk low" in (index.disk_low() or "")
    finally:
        await index.close()


async def test_search_filtered_by_owner_keeps_that_users_and_agents_points(index: VectorIndex, collection: str) -> None:
    owners = [("u1", "a1"), ("u1", "a2"), ("u2", "a1"), (None, None)]
    points = [VectorPoint(i, unit(0, tilt=i / 10), point_payload(format_timestamp(T0), 1, *owners[i % 4]))
              for i in range(1, 13)]
    await index.upsert(collection, points)
    assert sorted(ids(await index.search(collection, unit(0), 20, VectorFilter(user_id="u1")))) == [1, 4, 5, 8, 9, 12]
    assert sorted(ids(await index.search(collection, unit(0), 20, VectorFilter(agent_id="a1")))) == [2, 4, 6, 8, 10, 12]
    both = VectorFilter(user_id="u1", agent_id="a2", session_id=1)
    assert sorted(ids(await index.search(collection, unit(0), 20, both))) == [1, 5, 9]
    await index.delete_by_filter(collection, VectorFilter(user_id="u1"))
    assert sorted(await index.point_ids(collection)) == [2, 3, 6, 7, 10, 11]


# Metadata the points carry, and filters over it: the reference is ``VectorFilter.matches``
# (MetadataFilter's semantics on the payload's scalar metadata); every adapter must agree with it.
METADATA = [
    {"tier": "gold", "n": 1, "x": 1.5, "ok": True, "dotted.key": "a", "spaced key": "b"},
    {"tier": "silver", "n": 2, "x": -3.0, "ok": False, "dotted.key": "b", "list": [1, 2]},
    {"tier": "gold", "n": 2.0, "ok": 1, "nested": {"tier": "gold"}},
    {"tier": 1, "n": "1", "ok": "true", "x": 10},
    {"tier": "bronze", "n": 9007199254740992, "é/ü:@": "yes"},
    {},
]
FILTERS = [
    {"tier": "gold"}, {"tier": {"in": ["gold", "bronze"]}}, {"tier": 1}, {"n": 2}, {"n": 1},
    {"n": {"gte": 1, "lt": 2}}, {"x": {"gt": -3}}, {"x": {"lte": 1.5, "gte": -3.0}}, {"ok": 1},
    {"dotted.key": "a"}, {"spaced key": {"in": ["a", "b"]}}, {"é/ü:@": "yes"}, {"tier": "gold", "n": {"gte": 2}},
    {"list": 1}, {"nested": "gold"}, {"n": {"gt": 9007199254740991}}, {"tier": "none"},
]


@pytest.mark.parametrize("raw", FILTERS, ids=[str(f) for f in FILTERS])
async def test_every_adapter_agrees_with_the_reference_metadata_filter(
    index: VectorIndex, collection: str, raw: dict
) -> None:
    from domain.filters import parse_filter
    from domain.vectors import index_part

    inside, rest = index_part(parse_filter({"metadata": raw}))
    assert not rest  # every filter above can be applied inside the index
    points = [VectorPoint(i + 1, unit(0, tilt=i / 10), point_payload(format_timestamp(T0), 1, metadata=m))
              for i, m in enumerate(METADATA)]
    await index.upsert(collection, points)
    flt = VectorFilter(metadata=inside)
    expected = sorted(p.id for p in points if flt.matches(p.payload))
    assert sorted(ids(await index.search(collection, unit(0), 20, flt))) == expected


def test_conditions_an_index_cannot_test_exactly_stay_outside_it() -> None:
    from domain.filters import parse_filter
    from domain.vectors import index_part

    raw = {"a": {"exists": True}, "b": {"gte": "2025"}, "c": {"in": [1, 2]}, 'q"uote': "x", "d": 2**60,
           "f": True, "e": "ok"}
    inside, rest = index_part(parse_filter({"metadata": raw}))
    assert [c.key for c in inside] == ["e"]
    assert [c.key for c in rest.conditions] == ["a", "b", "c", 'q"uote', "d", "f"]
    with pytest.raises(ValueError):
        VectorFilter(metadata=rest.conditions)


# ---- CollectionAliases: backends other processes read (a Qdrant server; the in-memory double) ----

ALIASING = [pytest.param("memory"), pytest.param("server-local"), pytest.param("server", marks=needs_server)]


@pytest.fixture(params=ALIASING)
async def aliasing(request: pytest.FixtureRequest, tmp_path: Path, collection: str) -> AsyncIterator[VectorIndex]:
    async for opener in _opener(request, tmp_path, collection):
        opened = opener()
        await opened.ensure_collection(collection, DIM)
        yield opened
        if request.param == "server":  # leave nothing on a shared server
            await opened.drop_collection(f"{collection}_g2")
        await opened.close()


def test_only_backends_others_read_offer_aliases(tmp_path: Path) -> None:
    assert isinstance(InMemoryVectorIndex(), CollectionAliases)
    assert isinstance(QdrantServerIndex.in_memory(), CollectionAliases)
    assert not isinstance(QdrantEdgeIndex(tmp_path / "qdrant"), CollectionAliases)


async def test_an_alias_reads_as_its_collection_and_moves_in_one_step(aliasing, collection: str) -> None:
    index, alias, second = aliasing, f"{collection}_alias", f"{collection}_g2"
    await index.upsert(collection, [point(1, unit(0)), point(2, unit(1))])
    await index.point_alias(alias, collection)
    assert (await index.aliases())[alias] == collection
    assert await index.count(alias) == 2
    assert ids(await index.search(alias, unit(1), 1)) == [2]

    await index.build_collection(second, DIM, _batches([point(i, unit(i % DIM)) for i in range(1, 6)]))
    assert await index.count(alias) == 2  # a collection being built is not what the alias reads
    await index.point_alias(alias, second)  # the switch: one call
    assert (await index.aliases())[alias] == second
    assert await index.count(alias) == 5
    await index.drop_collection(collection)  # the old generation goes; the alias is untouched
    assert await index.count(alias) == 5
    await index.drop_collection(second)  # dropping the named collection removes its alias
    assert alias not in await index.aliases()


async def test_an_alias_cannot_name_a_missing_collection_or_take_a_collection_name(aliasing, collection: str) -> None:
    with pytest.raises(VectorIndexError, match="nowhere"):
        await aliasing.point_alias(f"{collection}_alias", "nowhere")
    await aliasing.ensure_collection(f"{collection}_g2", DIM)
    with pytest.raises(VectorIndexError, match=f"{collection}_g2"):
        await aliasing.point_alias(f"{collection}_g2", collection)
