"""Logging set-up: text or one JSON object per line, with secrets scrubbed from every record."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence

from domain.redaction import redact


class ScrubbingFormatter(logging.Formatter):
    """Redacts the whole formatted line, tracebacks included: the configured secrets and anything
    shaped like a credential (``Authorization: ...``, ``api-key=...``, ``sk-...``)."""

    def __init__(self, inner: logging.Formatter, secrets: Sequence[str]) -> None:
        super().__init__()
        self._inner = inner
        self._secrets = tuple(s for s in secrets if s)

    def format(self, record: logging.LogRecord) -> str:
        return redact(self._inner.format(record), self._secrets) or ""


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname.lower(),
                 "logger": record.name, "message": record.getMessage()}
        for key in ("request_id", "method", "path", "status", "duration_ms"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str, fmt: str, secrets: Sequence[str | None] = ()) -> None:
    handler = logging.StreamHandler(sys.stderr)
    inner = JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler.setFormatter(ScrubbingFormatter(inner, [s for s in secrets if s]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
