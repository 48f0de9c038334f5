"""Running the PostgreSQL store: counts, bytes stored, a real write as the health probe, close."""

from __future__ import annotations

import psycopg

from adapters.postgres.reads import Reads
from domain.models import utc_now
from domain.record_kinds import NAMES

_COUNTED = ("sessions", "episodes", "entities", "relationships", "summaries", "embedding_outbox")


class PostgresOperations(Reads):
    async def counts(self) -> dict[str, int]:
        def op(conn: psycopg.Connection) -> dict[str, int]:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _COUNTED}

        return await self._db.read(op)

    async def sizes(self) -> dict[str, int]:
        """The database's bytes, the stored embeddings', and each keyword index's stored data (its
        vectors' bytes: values, as SQLite's figure; the GIN index's pages grow in steps)."""
        def op(conn: psycopg.Connection) -> dict[str, int]:
            found = {"database": conn.execute("SELECT pg_database_size(current_database())").fetchone()[0],
                     "embeddings": conn.execute("SELECT pg_total_relation_size('embeddings')").fetchone()[0]}
            for name in NAMES:
                found[f"{name}_fts"] = int(conn.execute(
                    f"SELECT coalesce(sum(pg_column_size(tsv)), 0) FROM {name}").fetchone()[0])
            return found

        return await self._db.read(op)

    async def health(self) -> str | None:
        # A real write: a read succeeds on a read-only standby or a full disk that fails every write.
        try:
            await self._db.write(lambda conn: conn.execute(
                "INSERT INTO health_probe(id, checked_at) VALUES (1, %s)"
                " ON CONFLICT(id) DO UPDATE SET checked_at = excluded.checked_at", (utc_now(),)))
            return None
        except Exception as exc:  # health must report, never raise
            return f"{type(exc).__name__}: {exc}"

    async def close(self) -> None:
        self._db.close()
