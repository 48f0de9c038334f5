"""The ``StoreOperations`` port (counts, sizes, a health check that writes), over every adapter.
"""

from __future__ import annotations

from domain import writes
from domain.models import NewEntity, NewEpisode, NewRelationship, NewSummary
from ports.store import Store
from tests.contract.store_helpers import a_session


async def test_counts_report_rows_per_table(store: Store) -> None:
    session = await a_session(store)
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "u", "a"), NewEpisode(session.id, "u", "a")]))
    a, b = [(await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity(n, "t")))).item for n in ("A", "B")]
    await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(a.id, b.id, "r")))
    await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(session.id, "s")))
    assert await store.operations.counts() == {
        "sessions": 1, "episodes": 2, "entities": 2, "relationships": 1, "summaries": 1,
        "embedding_outbox": 5,
    }


async def test_a_working_store_reports_itself_healthy(store: Store) -> None:
    assert await store.operations.health() is None


async def test_sizes_are_non_negative_byte_counts(store):
    session = await store.uow.run(lambda tx: writes.create_session(tx, "sized", {}))
    await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "words to index", "more words")]))
    sizes = await store.operations.sizes()
    assert all(isinstance(v, int) and v >= 0 for v in sizes.values())
    if sizes:  # a store with files names the database and its keyword indexes
        assert sizes["database"] > 0 and sizes["episodes_fts"] > 0
        more = [NewEpisode(session.id, f"other words number {i}", "and a reply") for i in range(20)]
        await store.uow.run(lambda tx: writes.add_episodes(tx, more))
        assert (await store.operations.sizes())["episodes_fts"] > sizes["episodes_fts"]  # what is stored grows


async def test_the_store_health_check_writes(store: Store) -> None:
    assert await store.operations.health() is None
    assert await store.operations.health() is None  # the probe row is rewritten, never duplicated

