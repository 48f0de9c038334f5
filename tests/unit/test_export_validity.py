"""Export/import carries relationships' validity; history and the change feed are
not part of the export format (they describe changes to this store, not its records)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.sqlite.store import SqliteStore
from app.backup import export_store, import_store
from domain import writes
from domain.models import NewEntity, NewRelationship


async def _fill(path: str) -> None:
    store = SqliteStore.open(path)
    try:
        a = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "person")))).item.id
        b = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Acme", "company")))).item.id
        await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(
            a, b, "works_at", valid_from="2020-01-01T00:00:00.000Z", valid_to="2022-01-01T00:00:00.000Z")))
        await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(a, b, "works_at", valid_from="2023-01-01T00:00:00.000Z")))
    finally:
        await store.close()


async def _edges(path: str) -> list[tuple]:
    store = SqliteStore.open(path)
    try:
        return [(r.id, r.label, r.valid_from, r.valid_to) for r in await store.entities.relationships_of(1, "out")]
    finally:
        await store.close()


def test_validity_survives_an_export_and_import(tmp_path: Path) -> None:
    source, target, dump = str(tmp_path / "a.db"), str(tmp_path / "b.db"), tmp_path / "dump.jsonl"
    asyncio.run(_fill(source))
    export_store(source, dump)
    import_store(target, dump)
    assert asyncio.run(_edges(target)) == asyncio.run(_edges(source)) == [
        (1, "works_at", "2020-01-01T00:00:00.000Z", "2022-01-01T00:00:00.000Z"),
        (2, "works_at", "2023-01-01T00:00:00.000Z", None)]
