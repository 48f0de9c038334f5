"""SQLite's errors as the domain's: a storage failure is a clean 503, never a 500."""

from __future__ import annotations

from adapters.sqlite.driver import sqlite3
from domain.errors import DomainError, Unavailable


def translate_error(exc: sqlite3.Error) -> DomainError:
    """Map SQLite's storage failures to a clean 503 rather than a 500."""
    text = str(exc).lower()
    if "full" in text:
        return Unavailable("the database disk is full; nothing was written")
    if "readonly" in text or "read-only" in text:
        return Unavailable("the database is read-only; nothing was written")
    if "locked" in text or "busy" in text:
        return Unavailable("the database is busy; retry the request")
    return Unavailable("the database failed to complete the request")


def busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text
