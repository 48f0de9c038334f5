"""Which processes maintain what: the maintenance lock the container picks for each store and
vector index, and which processes drain the embedding outbox."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from adapters.memory.maintenance_lock import InMemoryMaintenanceLock
from adapters.postgres.maintenance_lock import PostgresMaintenanceLock
from adapters.sqlite.maintenance_lock import SqliteMaintenanceLock
from app.config import Settings
from app.container import _embedding_worker, build_container

POSTGRES = {"store": "postgres", "database_url": "postgresql://memory@127.0.0.1:9/memory"}  # never contacted here
SERVER = {"vector_index": "server", "qdrant_url": "http://127.0.0.1:9"}


@pytest.mark.parametrize(("values", "kind"), [
    ({**POSTGRES, **SERVER}, PostgresMaintenanceLock),  # replicas share one index: one maintains it
    ({**POSTGRES, "vector_index": "memory"}, InMemoryMaintenanceLock),  # each process's own index
    ({"store": "sqlite", **SERVER}, SqliteMaintenanceLock),
    ({"store": "memory", "vector_index": "memory"}, InMemoryMaintenanceLock),
])
def test_the_lock_follows_what_processes_share(tmp_path, values, kind) -> None:
    settings = Settings(sqlite_path=str(tmp_path / "memory.db"), embedder="fake", embedding_dim=16, **values)
    assert type(build_container(settings).maintenance_lock()) is kind


def test_every_postgresql_replica_drains_and_on_sqlite_only_the_maintainer() -> None:
    follower = SimpleNamespace(maintaining=False)
    assert _embedding_worker(None, 8, follower, "postgres")._drains()
    assert not _embedding_worker(None, 8, follower, "sqlite")._drains()
    assert _embedding_worker(None, 8, SimpleNamespace(maintaining=True), "sqlite")._drains()
