"""Domain errors. The app maps each to one HTTP status in a single handler table."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every error the domain raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    code = "conflict"


class Unauthorized(DomainError):
    """No credential, or one the service does not know (or revoked, or expired)."""

    code = "unauthorized"


class Forbidden(DomainError):
    """A known caller asking for what its key does not allow (a scope, another owner's write)."""

    code = "forbidden"


class Invalid(DomainError):
    """The request is well-formed but its content breaks a rule (bad FTS syntax, unknown ranker)."""

    code = "invalid"


class Unavailable(DomainError):
    """A backing component (database, index) cannot serve the request right now."""

    code = "unavailable"


class Busy(Unavailable):
    """The service is at a limit that frees up soon (e.g. the long-poll waiters): retry after
    ``retry_after`` seconds."""

    code = "busy"

    def __init__(self, message: str, *, retry_after: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class EmbeddingError(DomainError):
    """An embedder failed: unreachable, timed out, answered an error or a malformed body.

    ``permanent`` means the embedder refused this input itself (e.g. HTTP 400 for a text over its
    context length): retrying the same texts cannot succeed, so the outbox isolates and gives up
    on them instead of retrying them with the rest."""

    code = "embedding_failed"

    def __init__(self, message: str, *, field: str | None = None, permanent: bool = False) -> None:
        super().__init__(message, field=field)
        self.permanent = permanent


class VectorIndexError(DomainError):
    """The vector index failed or holds a collection incompatible with the configuration."""

    code = "vector_index_failed"


class DimensionMismatch(VectorIndexError):
    """A stored collection's vector size differs from the configured one (EMBEDDING_DIM)."""

    code = "dimension_mismatch"

    def __init__(self, collection: str, existing: int, configured: int) -> None:
        super().__init__(
            f"vector collection {collection!r} holds vectors of size {existing}, but the configured size "
            f"(EMBEDDING_DIM) is {configured}",
            field="EMBEDDING_DIM",
        )
        self.collection, self.existing, self.configured = collection, existing, configured
