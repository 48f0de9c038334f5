"""Removing credentials from text the service logs, stores or shows.

Upstream servers echo what they were sent (an OpenAI 401 body quotes the key), and exception
texts can carry headers, so every error text that leaves a component passes through ``redact``:
the known secret values, and anything shaped like a credential, become ``***``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
_MIN_SECRET = 4  # shorter "secrets" would mask ordinary words
_PATTERNS = (
    # Authorization: Bearer xyz / "api-key": "xyz" / api_key=xyz / x-api-key: xyz / token=xyz
    re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|api[-_ ]?key|apikey|access[-_]?token|token|secret|password)"
               r"(\W{0,3}?[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?([^\s\"',;&}]+)"),
    re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{4,})"),
    # Provider key shapes: OpenAI (sk-..., sk-proj-...), Anthropic, Hugging Face, GitHub, Slack.
    re.compile(r"()()\b((?:sk|rk|pk)-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|xox[abpr]-[A-Za-z0-9-]{8,})"),
)
# A piece of every pattern above (its key word, scheme or key prefix), lower-cased: ASCII text
# holding none of them skips the three substitutions. Plain substring tests, because the
# substitutions (or one case-insensitive alternation) cost ~11 µs per log line, half of writing a
# request's line. Only ASCII: the patterns' IGNORECASE also matches letters no lower-casing maps
# onto their ASCII twins ("ı" and "İ" match "i"), so other text always runs the patterns.
_CLUES = ("authorization", "api", "token", "secret", "password", "bearer", "basic", "k-", "hf_", "gh", "xox")


def redact(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """``text`` with every value in ``secrets`` and every credential-shaped token masked."""
    if not text:
        return text
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET:
            text = text.replace(secret, MASK)
    if text.isascii():
        lowered = text.lower()
        if not any(clue in lowered for clue in _CLUES):
            return text
    return masked_shapes(text)


def masked_shapes(text: str) -> str:
    """``text`` with every credential-shaped token masked (the patterns alone, no shortcut)."""
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return text
