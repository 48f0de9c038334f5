"""``InMemoryIndexCatalog``: the index manifest and stored embeddings beside an
``MemoryStore`` (the IndexCatalog test double; same contract suite as SQLite's)."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Sequence
from dataclasses import replace

from adapters.memory.state import live
from adapters.memory.store import MemoryStore
from domain.models import utc_now
from domain.record_kinds import KINDS
from domain.vectors import ModelRef
from ports.index_catalog import EmbeddingRow, Generation


class InMemoryIndexCatalog:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._id = secrets.token_hex(4)
        self._models: dict[ModelRef, int] = {}
        self._generations: dict[int, Generation] = {}
        self._next_generation = itertools.count(1)
        # (collection, ref_id) -> (model id, the text it was made from, blob): a changed text
        # forgets the embedding, as the SQLite triggers do.
        self._embeddings: dict[tuple[str, int], tuple[int, str, bytes]] = {}
        self._reindex: set[str] = set()

    def _table(self, collection: str) -> dict:
        return getattr(self._store.state, KINDS[collection].name)

    async def store_id(self) -> str:
        return self._id

    async def model_id(self, model: ModelRef) -> int:
        return self._models.setdefault(model, len(self._models) + 1)

    async def generations(self) -> list[Generation]:
        return [self._generations[k] for k in sorted(self._generations)]

    async def add_generation(self, collection: str, model_id: int, physical: str, reason: str) -> Generation:
        model = next(m for m, i in self._models.items() if i == model_id)
        generation = Generation(next(self._next_generation), collection, physical, model_id, model, "building", reason)
        self._generations[generation.id] = generation
        return generation

    async def activate(self, generation_id: int) -> None:
        target = self._generations[generation_id]
        for gid, g in list(self._generations.items()):
            if g.collection == target.collection and g.state == "active":
                self._generations[gid] = replace(g, state="retired")
        self._generations[generation_id] = replace(target, state="active")

    async def forget(self, generation_id: int) -> None:
        self._generations.pop(generation_id, None)

    async def store_embeddings(self, collection: str, model_id: int, vectors: Sequence[tuple[int, bytes]]) -> None:
        table = self._table(collection)
        for ref_id, blob in vectors:
            if ref_id in table:
                self._embeddings[(collection, ref_id)] = (model_id, table[ref_id].text, bytes(blob))

    def _row(self, collection: str, model_id: int, item) -> EmbeddingRow:
        stored = self._embeddings.get((collection, item.id))
        vector = stored[2] if stored and stored[0] == model_id and stored[1] == item.text else None
        return EmbeddingRow(item.id, KINDS[collection].payload(item), vector)

    async def embedding_rows(self, collection: str, model_id: int, after_id: int, limit: int) -> list[EmbeddingRow]:
        table = self._table(collection)
        ids = sorted(i for i in table if i > after_id)[:limit]
        return [self._row(collection, model_id, table[i]) for i in ids]

    async def embeddings_of(self, collection: str, model_id: int, ids: Sequence[int]) -> list[EmbeddingRow]:
        table = self._table(collection)
        return [self._row(collection, model_id, table[i]) for i in sorted(set(ids)) if i in table]

    async def row_ids(self, collection: str) -> list[int]:
        return sorted(self._table(collection))

    async def expired_ids(self, collection: str) -> set[int]:
        now = utc_now()
        return {i for i, r in self._table(collection).items() if not live(r, now)}

    async def pending_ids(self, collection: str) -> set[int]:
        return {j.ref_id for j in self._store.state.outbox.values() if j.collection == collection and j.op != "delete_session"}

    async def missing_embeddings(self, collection: str, model_id: int) -> int:
        table = self._table(collection)
        return sum(1 for item in table.values() if self._row(collection, model_id, item).vector is None)

    async def request_reindex(self, collections: Sequence[str]) -> None:
        self._reindex.update(collections)

    async def take_reindex_request(self) -> list[str]:
        taken, self._reindex = sorted(self._reindex), set()
        return taken
