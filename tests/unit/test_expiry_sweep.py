"""The expiry sweep the container runs: one pass purges what expired (real SQLite file)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from adapters.memory.maintenance_lock import InMemoryMaintenanceLock, LockCell
from adapters.sqlite.store import SqliteStore
from app.container import build_container
from app.expiry import ExpirySweeper
from domain import writes
from domain.models import NewEpisode, format_timestamp
from domain.services import ExpiryService


async def test_a_sweep_purges_expired_rows_and_their_keyword_rows(tmp_path) -> None:
    store = SqliteStore.open(str(tmp_path / "m.db"))
    try:
        past = format_timestamp(datetime.now(UTC) - timedelta(seconds=1))
        s = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}))
        await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(s.id, "penguins", "x", expires_at=past),
                                                                NewEpisode(s.id, "walrus", "y")]))
        sweeper = ExpirySweeper(ExpiryService(store), seconds=3600)
        assert await sweeper.sweep() == {"episodes": 1, "entities": 0, "summaries": 0}
        assert sweeper.purged == 1
        fts = await store.database.read(lambda c: c.execute(
            "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH 'penguins'").fetchone()[0])
        assert fts == 0
        sweeper.start()
        await sweeper.stop()  # the loop starts and stops cleanly
    finally:
        await store.close()


async def test_only_the_holder_of_the_maintenance_lock_sweeps(tmp_path) -> None:
    store = SqliteStore.open(str(tmp_path / "m.db"))
    cell = LockCell()
    other, mine = InMemoryMaintenanceLock(cell), InMemoryMaintenanceLock(cell)
    try:
        past = format_timestamp(datetime.now(UTC) - timedelta(seconds=1))
        s = await store.uow.run(lambda tx: writes.create_session(tx, "a", {}))
        await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(s.id, "penguins", "x", expires_at=past)]))
        sweeper = ExpirySweeper(ExpiryService(store), seconds=3600, turn=mine.try_acquire)
        assert await other.try_acquire()
        assert await sweeper.sweep() == {}  # another process maintains the store: it sweeps
        await other.release()
        assert await sweeper.sweep() == {"episodes": 1, "entities": 0, "summaries": 0}
        assert mine.held  # the sweep took the free lock, and keeps it
    finally:
        await store.close()


def test_the_container_builds_the_sweeper_with_the_declared_interval(make_settings) -> None:
    container = build_container(make_settings(expiry_sweep_seconds=7.5))
    assert container.expiry_sweeper()._seconds == 7.5
