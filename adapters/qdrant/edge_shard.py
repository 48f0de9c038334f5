"""Qdrant Edge shards on disk: opening one (clearing a lock left by our own orphaned build
child, naming the holder of any other), the dimension a shard was made with, the free space of
its volume, and the translation of a ``VectorFilter`` into the engine's filter."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from adapters.qdrant import locks
from domain.errors import VectorIndexError
from domain.filters import Condition
from domain.vectors import (
    AGENT_ID_FIELD, CREATED_AT_FIELD, SESSION_ID_FIELD, USER_ID_FIELD, VectorFilter, as_utc, payload_key,
)

# The engine creates one shard directory per collection and persists its config here.
CONFIG_FILE = "edge_config.json"


def edge_filter(filter: VectorFilter | None) -> qe.Filter | None:
    if filter is None or filter.is_empty:
        return None
    must: list[Any] = []
    if filter.session_id is not None:
        must.append(qe.FieldCondition(SESSION_ID_FIELD, match=qe.MatchValue(filter.session_id)))
    if filter.since is not None or filter.until is not None:
        # Full precision RFC 3339: payload times have milliseconds, bounds may have more.
        since = as_utc(filter.since).isoformat() if filter.since else None
        until = as_utc(filter.until).isoformat() if filter.until else None
        must.append(qe.FieldCondition(CREATED_AT_FIELD, range=qe.RangeDateTime(gte=since, lte=until)))
    for field, value in ((USER_ID_FIELD, filter.user_id), (AGENT_ID_FIELD, filter.agent_id)):
        if value is not None:
            must.append(qe.FieldCondition(field, match=qe.MatchValue(value)))
    for condition in filter.metadata:
        must.extend(_metadata_conditions(condition))
    return qe.Filter(must=must)


def _metadata_conditions(c: Condition) -> list[Any]:
    """One indexable metadata condition (``domain.vectors.indexable``) as engine conditions."""
    key, out = payload_key(c.key), []
    if c.equals is not None:
        first = c.equals[0]
        if isinstance(first, str) and len(c.equals) > 1:
            out.append(qe.FieldCondition(key, match=qe.MatchAny(list(c.equals))))
        elif isinstance(first, str):
            out.append(qe.FieldCondition(key, match=qe.MatchValue(first)))
        else:  # one number: a closed range, so 1 matches 1.0 as it does in MetadataFilter
            out.append(qe.FieldCondition(key, range=qe.RangeFloat(gte=float(first), lte=float(first))))
    if any(b is not None for b in (c.gt, c.gte, c.lt, c.lte)):
        out.append(qe.FieldCondition(key, range=qe.RangeFloat(
            gt=_f(c.gt), gte=_f(c.gte), lt=_f(c.lt), lte=_f(c.lte))))
    return out


def _f(bound: Any) -> float | None:
    return None if bound is None else float(bound)


def free_bytes(path: Path) -> int:
    """Free bytes for an unprivileged writer on the volume holding ``path`` (or its nearest
    existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    stats = os.statvfs(probe)
    return stats.f_bavail * stats.f_frsize


def open_shard(opener: Callable[[], qe.EdgeShard], shard_path: Path, retry: bool = True) -> qe.EdgeShard:
    try:
        return opener()
    except Exception as error:
        text = str(error)
        locked = "WouldBlock" in text or "lock" in text.lower()
        if locked and retry and locks.clear_orphans(shard_path):
            # The holder was our own orphaned build child: it is gone, and so is its lock.
            return open_shard(opener, shard_path, retry=False)
        if locked:
            holders = ", ".join(locks.describe(p) for p in locks.lock_holders(shard_path)) or "unknown"
            reason = f"it is locked by another process: {holders}"
        elif "ermission" in text or "Read-only" in text:
            reason = "it is not writable"
        else:
            reason = "the engine refused it"
        raise VectorIndexError(
            f"cannot open the Qdrant Edge shard {shard_path}: {reason} ({text})"
        ) from error


def _persisted_vectors(shard_path: Path) -> dict | None:
    try:
        vectors = json.loads((shard_path / CONFIG_FILE).read_text())["vectors"][""]
        return vectors if isinstance(vectors, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def persisted_size(shard_path: Path) -> int | None:
    try:
        return int((_persisted_vectors(shard_path) or {})["size"])
    except (KeyError, TypeError, ValueError):
        return None


def persisted_half(shard_path: Path) -> bool:
    """Whether the shard at ``shard_path`` stores its vectors in float16 (``edge_build.edge_config``)."""
    return str((_persisted_vectors(shard_path) or {}).get("datatype", "")).lower() == "float16"
