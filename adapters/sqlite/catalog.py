"""``SqliteIndexCatalog``: the index manifest and stored embeddings in the store's own file."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.sqlite.database import SqliteDatabase
from adapters.sqlite.driver import sqlite3
from domain.models import utc_now
from domain.record_kinds import KINDS
from domain.vectors import ModelRef, point_payload
from ports.index_catalog import EmbeddingRow, Generation



def _table(collection: str) -> str:
    try:
        return KINDS[collection].name  # each kind's rows live in the table of its name
    except KeyError:
        raise ValueError(f"unknown collection {collection!r}") from None


def _select(collection: str) -> str:
    # Kinds outside sessions (entities): their payload has no sessionId.
    session = "r.session_id" if KINDS[collection].in_sessions else "NULL"
    return (f"SELECT r.id, r.created_at, {session}, e.vector FROM {_table(collection)} r"
            " LEFT JOIN embeddings e ON e.collection = ? AND e.ref_id = r.id AND e.model_id = ?")


def _row(found: sqlite3.Row) -> EmbeddingRow:
    return EmbeddingRow(found[0], point_payload(found[1], found[2]), found[3])


def _generation(found: sqlite3.Row) -> Generation:
    model = ModelRef(found["embedder"], found["model"], found["dimension"], found["distance"])
    return Generation(found["id"], found["collection"], found["physical"], found["model_id"], model,
                      found["state"], found["reason"])


class SqliteIndexCatalog:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def store_id(self) -> str:
        return await self._db.read(
            lambda conn: conn.execute("SELECT value FROM index_meta WHERE key = 'store_id'").fetchone()[0])

    async def model_id(self, model: ModelRef) -> int:
        key = (model.embedder, model.model, model.dimension, model.distance)

        def op(conn: sqlite3.Connection) -> int:
            conn.execute(
                "INSERT OR IGNORE INTO index_models(embedder, model, dimension, distance, created_at)"
                " VALUES (?, ?, ?, ?, ?)", (*key, utc_now()))
            return conn.execute(
                "SELECT id FROM index_models WHERE embedder = ? AND model = ? AND dimension = ? AND distance = ?",
                key).fetchone()[0]

        return await self._db.write(op)

    async def generations(self) -> list[Generation]:
        return await self._db.read(lambda conn: [_generation(r) for r in conn.execute(
            "SELECT g.*, m.embedder, m.model, m.dimension, m.distance FROM index_generations g"
            " JOIN index_models m ON m.id = g.model_id ORDER BY g.id")])

    async def add_generation(self, collection: str, model_id: int, physical: str, reason: str) -> Generation:
        def op(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "INSERT INTO index_generations(collection, physical, model_id, state, reason, created_at)"
                " VALUES (?, ?, ?, 'building', ?, ?)", (collection, physical, model_id, reason, utc_now())).lastrowid

        new_id = await self._db.write(op)
        return next(g for g in await self.generations() if g.id == new_id)

    async def activate(self, generation_id: int) -> None:
        def op(conn: sqlite3.Connection) -> None:
            collection = conn.execute(
                "SELECT collection FROM index_generations WHERE id = ?", (generation_id,)).fetchone()[0]
            conn.execute("UPDATE index_generations SET state = 'retired' WHERE collection = ? AND state = 'active'",
                         (collection,))
            conn.execute("UPDATE index_generations SET state = 'active', activated_at = ? WHERE id = ?",
                         (utc_now(), generation_id))

        await self._db.write(op)

    async def forget(self, generation_id: int) -> None:
        await self._db.write(lambda conn: conn.execute("DELETE FROM index_generations WHERE id = ?", (generation_id,)))

    async def store_embeddings(self, collection: str, model_id: int, vectors: Sequence[tuple[int, bytes]]) -> None:
        if not vectors:
            return
        table = _table(collection)

        def op(conn: sqlite3.Connection) -> None:
            # Only for records that still exist: a record deleted while it was being embedded
            # must not leave an embedding behind that nothing would ever delete.
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings(collection, ref_id, model_id, vector)"
                f" SELECT ?, id, ?, ? FROM {table} WHERE id = ?",
                [(collection, model_id, blob, ref_id) for ref_id, blob in vectors])

        await self._db.write(op)

    async def embedding_rows(self, collection: str, model_id: int, after_id: int, limit: int) -> list[EmbeddingRow]:
        sql = _select(collection) + " WHERE r.id > ? ORDER BY r.id LIMIT ?+0"
        return await self._db.read(
            lambda conn: [_row(r) for r in conn.execute(sql, (collection, model_id, after_id, limit))])

    async def embeddings_of(self, collection: str, model_id: int, ids: Sequence[int]) -> list[EmbeddingRow]:
        wanted = sorted(set(ids))
        found: list[EmbeddingRow] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            sql = _select(collection) + f" WHERE r.id IN ({','.join('?' * len(chunk))}) ORDER BY r.id"
            found += await self._db.read(
                lambda conn, c=chunk, q=sql: [_row(r) for r in conn.execute(q, (collection, model_id, *c))])
        return found

    async def row_ids(self, collection: str) -> list[int]:
        return await self._db.read(lambda conn: [r[0] for r in conn.execute(
            f"SELECT id FROM {_table(collection)} ORDER BY id")])

    async def expired_ids(self, collection: str) -> set[int]:
        return await self._db.read(lambda conn: {r[0] for r in conn.execute(
            f"SELECT id FROM {_table(collection)} WHERE expires_at IS NOT NULL AND expires_at <= ?", (utc_now(),))})

    async def pending_ids(self, collection: str) -> set[int]:
        return await self._db.read(lambda conn: {r[0] for r in conn.execute(
            "SELECT ref_id FROM embedding_outbox WHERE collection = ? AND op IN ('upsert', 'delete')",
            (collection,))})

    async def missing_embeddings(self, collection: str, model_id: int) -> int:
        return await self._db.read(lambda conn: conn.execute(
            f"SELECT count(*) FROM {_table(collection)} r WHERE NOT EXISTS (SELECT 1 FROM embeddings e"
            " WHERE e.collection = ? AND e.ref_id = r.id AND e.model_id = ?)", (collection, model_id)).fetchone()[0])

    async def request_reindex(self, collections: Sequence[str]) -> None:
        def op(conn: sqlite3.Connection) -> None:
            found = conn.execute("SELECT value FROM index_meta WHERE key = 'reindex'").fetchone()
            wanted = sorted(set(found[0].split(",") if found and found[0] else []) | set(collections))
            conn.execute("INSERT OR REPLACE INTO index_meta(key, value) VALUES ('reindex', ?)", (",".join(wanted),))

        await self._db.write(op)

    async def take_reindex_request(self) -> list[str]:
        # A cheap read first: this is polled every few seconds and almost always finds nothing.
        found = await self._db.read(
            lambda conn: conn.execute("SELECT value FROM index_meta WHERE key = 'reindex'").fetchone())
        if not found:
            return []

        def op(conn: sqlite3.Connection) -> list[str]:
            row = conn.execute("DELETE FROM index_meta WHERE key = 'reindex' RETURNING value").fetchone()
            return [c for c in (row[0] if row else "").split(",") if c]

        return await self._db.write(op)
