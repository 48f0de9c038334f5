"""``PostgresIndexCatalog``: the index manifest and stored embeddings in the store's own database."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from adapters.postgres.database import PostgresDatabase
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
            " LEFT JOIN embeddings e ON e.collection = %s AND e.ref_id = r.id AND e.model_id = %s")


def _row(found) -> EmbeddingRow:
    return EmbeddingRow(found[0], point_payload(found[1], found[2]), None if found[3] is None else bytes(found[3]))


def _generation(found) -> Generation:
    model = ModelRef(found["embedder"], found["model"], found["dimension"], found["distance"])
    return Generation(found["id"], found["collection"], found["physical"], found["model_id"], model,
                      found["state"], found["reason"])


class PostgresIndexCatalog:
    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    async def store_id(self) -> str:
        return await self._db.read(
            lambda conn: conn.execute("SELECT value FROM index_meta WHERE key = 'store_id'").fetchone()[0])

    async def model_id(self, model: ModelRef) -> int:
        key = (model.embedder, model.model, model.dimension, model.distance)

        def op(conn: psycopg.Connection) -> int:
            conn.execute("INSERT INTO index_models(embedder, model, dimension, distance, created_at)"
                         " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", (*key, utc_now()))
            return conn.execute("SELECT id FROM index_models WHERE embedder = %s AND model = %s AND dimension = %s"
                                " AND distance = %s", key).fetchone()[0]

        return await self._db.write(op)

    async def generations(self) -> list[Generation]:
        return await self._db.read(lambda conn: [_generation(r) for r in conn.execute(
            "SELECT g.*, m.embedder, m.model, m.dimension, m.distance FROM index_generations g"
            " JOIN index_models m ON m.id = g.model_id ORDER BY g.id")])

    async def add_generation(self, collection: str, model_id: int, physical: str, reason: str) -> Generation:
        new_id = await self._db.write(lambda conn: conn.execute(
            "INSERT INTO index_generations(collection, physical, model_id, state, reason, created_at)"
            " VALUES (%s, %s, %s, 'building', %s, %s) RETURNING id",
            (collection, physical, model_id, reason, utc_now())).fetchone()[0])
        return next(g for g in await self.generations() if g.id == new_id)

    async def activate(self, generation_id: int) -> None:
        def op(conn: psycopg.Connection) -> None:
            collection = conn.execute("SELECT collection FROM index_generations WHERE id = %s FOR UPDATE",
                                      (generation_id,)).fetchone()[0]
            conn.execute("UPDATE index_generations SET state = 'retired' WHERE collection = %s AND state = 'active'",
                         (collection,))
            conn.execute("UPDATE index_generations SET state = 'active', activated_at = %s WHERE id = %s",
                         (utc_now(), generation_id))

        await self._db.write(op)

    async def forget(self, generation_id: int) -> None:
        await self._db.write(lambda conn: conn.execute("DELETE FROM index_generations WHERE id = %s", (generation_id,)))

    async def store_embeddings(self, collection: str, model_id: int, vectors: Sequence[tuple[int, bytes]]) -> None:
        if not vectors:
            return
        table = _table(collection)

        def op(conn: psycopg.Connection) -> None:
            # Only for records that still exist: a record deleted while it was being embedded
            # must not leave an embedding behind that nothing would ever delete.
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO embeddings(collection, ref_id, model_id, vector)"
                    f" SELECT %s, id, %s, %s FROM {table} WHERE id = %s"
                    " ON CONFLICT (collection, ref_id) DO UPDATE SET model_id = excluded.model_id,"
                    " vector = excluded.vector",
                    [(collection, model_id, blob, ref_id) for ref_id, blob in vectors])

        await self._db.write(op)

    async def embedding_rows(self, collection: str, model_id: int, after_id: int, limit: int) -> list[EmbeddingRow]:
        sql = _select(collection) + " WHERE r.id > %s ORDER BY r.id LIMIT %s"
        return await self._db.read(
            lambda conn: [_row(r) for r in conn.execute(sql, (collection, model_id, after_id, limit))])

    async def embeddings_of(self, collection: str, model_id: int, ids: Sequence[int]) -> list[EmbeddingRow]:
        wanted = sorted(set(ids))
        sql = _select(collection) + " WHERE r.id = ANY(%s) ORDER BY r.id"
        return await self._db.read(lambda conn: [_row(r) for r in conn.execute(sql, (collection, model_id, wanted))])

    async def row_ids(self, collection: str) -> list[int]:
        return await self._db.read(lambda conn: [r[0] for r in conn.execute(
            f"SELECT id FROM {_table(collection)} ORDER BY id")])

    async def expired_ids(self, collection: str) -> set[int]:
        return await self._db.read(lambda conn: {r[0] for r in conn.execute(
            f"SELECT id FROM {_table(collection)} WHERE expires_at IS NOT NULL AND expires_at <= %s", (utc_now(),))})

    async def pending_ids(self, collection: str) -> set[int]:
        return await self._db.read(lambda conn: {r[0] for r in conn.execute(
            "SELECT ref_id FROM embedding_outbox WHERE collection = %s AND op IN ('upsert', 'delete')",
            (collection,))})

    async def missing_embeddings(self, collection: str, model_id: int) -> int:
        return await self._db.read(lambda conn: conn.execute(
            f"SELECT count(*) FROM {_table(collection)} r WHERE NOT EXISTS (SELECT 1 FROM embeddings e"
            " WHERE e.collection = %s AND e.ref_id = r.id AND e.model_id = %s)", (collection, model_id)).fetchone()[0])

    async def request_reindex(self, collections: Sequence[str]) -> None:
        def op(conn: psycopg.Connection) -> None:
            found = conn.execute("SELECT value FROM index_meta WHERE key = 'reindex' FOR UPDATE").fetchone()
            wanted = sorted(set(found[0].split(",") if found and found[0] else []) | set(collections))
            conn.execute("INSERT INTO index_meta(key, value) VALUES ('reindex', %s)"
                         " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (",".join(wanted),))

        await self._db.write(op)

    async def take_reindex_request(self) -> list[str]:
        def op(conn: psycopg.Connection) -> list[str]:
            row = conn.execute("DELETE FROM index_meta WHERE key = 'reindex' RETURNING value").fetchone()
            return [c for c in (row[0] if row else "").split(",") if c]

        return await self._db.write(op)
