"""Running the SQLite store: counts, bytes stored, a real write as the health probe, close."""

from __future__ import annotations

from adapters.sqlite.driver import sqlite3
from adapters.sqlite.reads import Reads
from domain.models import utc_now
from domain.record_kinds import NAMES

_COUNTED = ("sessions", "episodes", "entities", "relationships", "summaries", "embedding_outbox")


class SqliteOperations(Reads):
    async def counts(self) -> dict[str, int]:
        def op(conn: sqlite3.Connection) -> dict[str, int]:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _COUNTED}

        return await self._db.read(op)

    async def sizes(self) -> dict[str, int]:
        """The file's bytes (its pages), and the bytes stored for the embeddings and for each keyword
        index: their values' lengths, without the pages' own overhead (the SQLite the service runs on,
        ``driver.py``, is built without the ``dbstat`` table that counts pages per table)."""
        def op(conn: sqlite3.Connection) -> dict[str, int]:
            page = conn.execute("PRAGMA page_size").fetchone()[0]
            found = {"database": page * conn.execute("PRAGMA page_count").fetchone()[0]}
            # Stored embeddings (float16): what rebuilding the vector index without the embedder costs.
            found["embeddings"] = conn.execute(
                "SELECT coalesce(sum(length(vector)), 0) FROM embeddings").fetchone()[0]
            for name in NAMES:  # the index's blocks and each document's sizes
                found[f"{name}_fts"] = conn.execute(
                    f"SELECT (SELECT coalesce(sum(length(block)), 0) FROM {name}_fts_data)"
                    f" + (SELECT coalesce(sum(length(sz)), 0) FROM {name}_fts_docsize)").fetchone()[0]
            return found

        return await self._db.read(op)

    async def health(self) -> str | None:
        # A real write through the writer thread (one row rewritten in a scratch table): a read
        # succeeds on a full disk, a read-only file or after an I/O error that fails every write.
        try:
            await self._db.write(lambda conn: conn.execute(
                "INSERT INTO health_probe(id, checked_at) VALUES (1, ?)"
                " ON CONFLICT(id) DO UPDATE SET checked_at = excluded.checked_at", (utc_now(),)))
            return None
        except Exception as exc:  # health must report, never raise
            return f"{type(exc).__name__}: {exc}"

    async def close(self) -> None:
        self._db.close()
