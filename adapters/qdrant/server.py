"""QdrantServerIndex: a Qdrant server or cluster through qdrant-client's async client.

The same code runs on qdrant-client's local mode (``AsyncQdrantClient(":memory:")``), which is
how the contract suite exercises it without a server. Local mode searches exactly and ignores
payload indexes and search params (it warns about them), so ``in_memory()`` turns those off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from domain.errors import DimensionMismatch, VectorIndexError
from domain.filters import Condition
from domain.vectors import (
    AGENT_ID_FIELD,
    CREATED_AT_FIELD,
    SESSION_ID_FIELD,
    USER_ID_FIELD,
    payload_key,
    PointBatch,
    VectorFilter,
    VectorHit,
    VectorPoint,
    as_utc,
)


def server_filter(filter: VectorFilter | None) -> qm.Filter | None:
    if filter is None or filter.is_empty:
        return None
    must: list[Any] = []
    if filter.session_id is not None:
        must.append(qm.FieldCondition(key=SESSION_ID_FIELD, match=qm.MatchValue(value=filter.session_id)))
    if filter.since is not None or filter.until is not None:
        must.append(
            qm.FieldCondition(
                key=CREATED_AT_FIELD,
                range=qm.DatetimeRange(
                    gte=as_utc(filter.since) if filter.since else None,
                    lte=as_utc(filter.until) if filter.until else None,
                ),
            )
        )
    for field, value in ((USER_ID_FIELD, filter.user_id), (AGENT_ID_FIELD, filter.agent_id)):
        if value is not None:
            must.append(qm.FieldCondition(key=field, match=qm.MatchValue(value=value)))
    for condition in filter.metadata:
        must.extend(_metadata_conditions(condition))
    return qm.Filter(must=must)


def _metadata_conditions(c: Condition) -> list[Any]:
    """One indexable metadata condition (``domain.vectors.indexable``) as qdrant-client conditions."""
    key, out = payload_key(c.key), []
    if c.equals is not None:
        first = c.equals[0]
        if isinstance(first, str) and len(c.equals) > 1:
            out.append(qm.FieldCondition(key=key, match=qm.MatchAny(any=list(c.equals))))
        elif isinstance(first, str):
            out.append(qm.FieldCondition(key=key, match=qm.MatchValue(value=first)))
        else:  # one number: a closed range, so 1 matches 1.0 as it does in MetadataFilter
            out.append(qm.FieldCondition(key=key, range=qm.Range(gte=first, lte=first)))
    if any(b is not None for b in (c.gt, c.gte, c.lt, c.lte)):
        out.append(qm.FieldCondition(key=key, range=qm.Range(gt=c.gt, gte=c.gte, lt=c.lt, lte=c.lte)))
    return out


class QdrantServerIndex:
    """A ``VectorIndex`` on a Qdrant server; every write waits until it is applied (``wait=True``).

    ``server_features`` is false for local mode: no payload indexes, no HNSW search params.
    ``persistent`` is true for a server, false for local ``:memory:`` mode.
    """

    def __init__(
        self,
        client: AsyncQdrantClient,
        *,
        server_features: bool = True,
        persistent: bool = True,
        hnsw_m: int = 16,
        hnsw_ef_construct: int = 200,
        search_ef: int = 128,
    ) -> None:
        self._client = client
        self._server_features = server_features
        self.persistent = persistent
        self._hnsw_m = hnsw_m
        self._hnsw_ef_construct = hnsw_ef_construct
        self._search_ef = search_ef
        self._closed = False

    @classmethod
    def from_url(cls, url: str, api_key: str | None = None, timeout: float = 10.0) -> QdrantServerIndex:
        """An index on the server at ``url`` (QDRANT_URL, QDRANT_API_KEY); connects lazily."""
        return cls(AsyncQdrantClient(url=url, api_key=api_key, timeout=int(timeout)))

    @classmethod
    def in_memory(cls) -> QdrantServerIndex:
        """qdrant-client local mode in this process: for tests and benchmarks."""
        return cls(AsyncQdrantClient(":memory:"), server_features=False, persistent=False)

    # ---- port ----------------------------------------------------------------------------------

    async def ensure_collection(self, name: str, dimension: int) -> None:
        try:
            if not await self._client.collection_exists(name):
                try:
                    await self._client.create_collection(
                        name,
                        vectors_config=qm.VectorParams(size=dimension, distance=qm.Distance.COSINE),
                        hnsw_config=qm.HnswConfigDiff(m=self._hnsw_m, ef_construct=self._hnsw_ef_construct),
                    )
                except Exception:
                    # Another instance may have created it meanwhile; the size check below decides.
                    if not await self._client.collection_exists(name):
                        raise
                else:
                    await self._create_payload_indexes(name)
            existing = await self._vector_size(name)
        except VectorIndexError:
            raise
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not ensure collection {name!r}: {error}") from error
        if existing != dimension:
            raise DimensionMismatch(name, existing, dimension)

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        structs = [
            qm.PointStruct(id=p.id, vector=[float(x) for x in p.vector], payload=dict(p.payload))
            for p in points
        ]
        try:
            await self._client.upsert(collection, points=structs, wait=True)
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not upsert into {collection!r}: {error}") from error

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filter: VectorFilter | None = None,
        score_threshold: float | None = None,
    ) -> list[VectorHit]:
        if limit <= 0:
            return []
        params = qm.SearchParams(hnsw_ef=max(self._search_ef, limit)) if self._server_features else None
        try:
            response = await self._client.query_points(
                collection,
                query=[float(x) for x in vector],
                limit=limit,
                query_filter=server_filter(filter),
                score_threshold=score_threshold,
                search_params=params,
                with_payload=False,
                with_vectors=False,
            )
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not search {collection!r}: {error}") from error
        return [VectorHit(int(p.id), float(p.score)) for p in response.points]

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        if not ids:
            return
        try:
            await self._client.delete(
                collection, points_selector=qm.PointIdsList(points=list(ids)), wait=True
            )
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not delete from {collection!r}: {error}") from error

    async def delete_by_filter(self, collection: str, filter: VectorFilter) -> None:
        condition = server_filter(filter)
        if condition is None:
            raise VectorIndexError(f"refusing to delete every point of {collection!r}: the filter is empty")
        try:
            await self._client.delete(
                collection, points_selector=qm.FilterSelector(filter=condition), wait=True
            )
        except Exception as error:
            raise VectorIndexError(
                f"Qdrant could not delete by filter from {collection!r}: {error}"
            ) from error

    async def count(self, collection: str) -> int:
        try:
            return (await self._client.count(collection, exact=True)).count
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not count {collection!r}: {error}") from error

    async def retrieve_vectors(self, collection: str, ids: Sequence[int]) -> dict[int, list[float]]:
        if not ids:
            return {}
        try:
            records = await self._client.retrieve(
                collection, ids=list(ids), with_payload=False, with_vectors=True
            )
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not retrieve from {collection!r}: {error}") from error
        return {int(r.id): list(r.vector) for r in records if isinstance(r.vector, list)}

    async def collections(self) -> list[str]:
        try:
            return sorted(c.name for c in (await self._client.get_collections()).collections)
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not list collections: {error}") from error

    async def drop_collection(self, name: str, keep: bool = False) -> None:
        # A server keeps no files of ours to move aside: snapshots are the server's business.
        try:
            if await self._client.collection_exists(name):
                await self._client.delete_collection(name)
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not drop collection {name!r}: {error}") from error

    async def build_collection(self, name: str, dimension: int, batches: AsyncIterator[PointBatch]) -> None:
        # The server indexes in its own optimizer threads: a build is a create and plain upserts.
        try:
            exists = await self._client.collection_exists(name)
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not check collection {name!r}: {error}") from error
        if exists:
            raise VectorIndexError(f"cannot build vector collection {name!r}: it exists")
        await self.ensure_collection(name, dimension)
        async for batch in batches:
            await self.upsert(name, batch.points())

    # ---- CollectionAliases: the active generation under a stable name -------------------------

    async def aliases(self) -> dict[str, str]:
        try:
            found = (await self._client.get_aliases()).aliases
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not list aliases: {error}") from error
        return {a.alias_name: a.collection_name for a in found}

    async def point_alias(self, alias: str, collection: str) -> None:
        """One ``update_collection_aliases`` call: Qdrant applies its actions atomically, so a
        reader of the alias sees the old collection or the new one, never neither."""
        actions: list[Any] = [qm.CreateAliasOperation(
            create_alias=qm.CreateAlias(collection_name=collection, alias_name=alias))]
        try:
            if alias in await self.aliases():  # deleting an absent alias is an error on some versions
                actions.insert(0, qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=alias)))
            if not await self._client.collection_exists(collection):
                raise VectorIndexError(f"cannot point alias {alias!r} at {collection!r}: no such collection")
            await self._client.update_collection_aliases(change_aliases_operations=actions)
        except VectorIndexError:
            raise
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not point alias {alias!r} at {collection!r}: {error}") from error

    async def point_ids(self, collection: str) -> list[int]:
        found: list[int] = []
        offset = None
        try:
            while True:
                records, offset = await self._client.scroll(
                    collection, limit=10_000, offset=offset, with_payload=False, with_vectors=False)
                found.extend(int(r.id) for r in records)
                if offset is None:
                    return sorted(found)
        except Exception as error:
            raise VectorIndexError(f"Qdrant could not list points of {collection!r}: {error}") from error

    async def rebuild_advised(self, collection: str) -> bool:
        return False

    def disk_low(self) -> str | None:
        return None

    async def health(self) -> str | None:
        if self._closed:
            return "the Qdrant client is closed"
        try:
            await self._client.get_collections()
        except Exception as error:  # noqa: BLE001 - health must never raise
            return f"Qdrant does not answer: {error}"
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._client.close()
        except Exception as error:
            raise VectorIndexError(f"Qdrant client did not close cleanly: {error}") from error

    # ---- helpers -------------------------------------------------------------------------------

    async def _vector_size(self, name: str) -> int:
        info = await self._client.get_collection(name)
        vectors = info.config.params.vectors
        if isinstance(vectors, qm.VectorParams):
            return vectors.size
        raise VectorIndexError(f"vector collection {name!r} uses named vectors; expected one unnamed vector")

    async def _create_payload_indexes(self, name: str) -> None:
        if not self._server_features:
            return
        await self._client.create_payload_index(
            name, SESSION_ID_FIELD, field_schema=qm.PayloadSchemaType.INTEGER, wait=True
        )
        await self._client.create_payload_index(
            name, CREATED_AT_FIELD, field_schema=qm.PayloadSchemaType.DATETIME, wait=True
        )
        for owner in (USER_ID_FIELD, AGENT_ID_FIELD):  # scoped search filters inside the index
            await self._client.create_payload_index(
                name, owner, field_schema=qm.PayloadSchemaType.KEYWORD, wait=True
            )
