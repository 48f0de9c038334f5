"""Credentials never reach a log line, a stored error or /health."""

from __future__ import annotations

import io
import logging

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.embedders.http import make_http_client
from adapters.embedders.openai import OpenAIEmbedder
from app.logs import configure
from domain.errors import EmbeddingError
from domain.redaction import masked_shapes, redact
from tests.support.embedding_servers import EmbeddingTestServer

OPENAI_KEY = "sk-proj-Zx81LmQ0a9VvTtRr55"


@pytest.mark.parametrize("text", [
    f"Incorrect API key provided: {OPENAI_KEY}.",
    "Authorization: Bearer abc.def-123456",
    '{"headers": {"authorization": "Basic dXNlcjpwYXNz"}}',
    "GET /x?api_key=s3cr3tvalue&y=1",
    '{"api-key": "azure-key-0001"}',
    "x-api-key: qdrant-key-777",
    "token hf_abcdefghijklmnop in the url",
])
def test_credential_shapes_are_masked(text):
    masked = redact(text)
    for secret in (OPENAI_KEY, "abc.def-123456", "dXNlcjpwYXNz", "s3cr3tvalue", "azure-key-0001", "qdrant-key-777",
                   "hf_abcdefghijklmnop"):
        assert secret not in masked
    assert "***" in masked


@settings(max_examples=400)
@given(st.lists(st.sampled_from([
    "Authorization", "PROXY-AUTHORIZATION", "x-api-key", "Api Key", "apikey", "ACCESS_TOKEN", "Token", "secret",
    "Password", "bearer", "BASIC", "sk-", "rk-", "pk-", "hf_", "ghp_", "gho_", "xoxb-", "xoxp-", ": ", "=", '"',
    " ", "abcdefgh12345678", "ſecret", "Key", "GET /episodes/{episode_id} 200", "é", "ı", "İ",
    "authorızation: abc12345", "authorİzation: abc12345", "apı_key=abc12345", "basıc dXNlcjpwYXNz",
]), max_size=8).map("".join) | st.text(max_size=60))
def test_the_clue_check_skips_only_text_no_pattern_would_change(text):
    """The substring check before the substitutions is a shortcut, never a filter: with or without
    it every text comes out the same."""
    assert redact(text) == masked_shapes(text)


def test_ordinary_text_is_left_alone():
    for text in ("tokenCount must be >= 0", "the secret garden", "Bearer of bad news", "sk-1"):
        assert redact(text) == text


async def test_an_upstream_that_echoes_the_key_never_gets_it_into_the_error():
    async with make_http_client(5.0) as client:
        with EmbeddingTestServer("openai", 8, api_key="the-right-key") as server:
            embedder = OpenAIEmbedder(server.url, "m", 8, client, api_key=OPENAI_KEY)
            with pytest.raises(EmbeddingError) as caught:
                await embedder.embed(["hello"])
            probe = await embedder.probe()
    assert "HTTP 401" in caught.value.message
    assert OPENAI_KEY not in caught.value.message and OPENAI_KEY not in (probe.error or "")


def test_log_lines_and_tracebacks_are_scrubbed(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure("info", "json", secrets=["memory-key-42", OPENAI_KEY])
        log = logging.getLogger("nexusai.test")
        log.info("calling with memory-key-42 and Authorization: Bearer zzzz9999")
        try:
            raise httpx.HTTPError(f"upstream said {OPENAI_KEY}")
        except httpx.HTTPError:
            log.exception("failed")
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    text = stream.getvalue()
    assert text.count("***") >= 3
    for secret in ("memory-key-42", OPENAI_KEY, "zzzz9999"):
        assert secret not in text
