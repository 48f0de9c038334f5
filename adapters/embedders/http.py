"""The HTTP plumbing the HTTP embedders share: the client factory and one JSON POST.

Every transport failure becomes an ``EmbeddingError`` whose message names the URL and the
problem, so an operator reading ``/health`` or a worker log knows what to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

from domain.errors import EmbeddingError
from domain.redaction import redact

_SNIPPET = 200
# Statuses that refuse the input itself. 401/403/404 (key, model name) and 408/429/5xx are about
# the server or its configuration: every input would fail alike, so they stay retryable.
INPUT_REFUSED = frozenset({400, 413, 422})


def make_http_client(timeout_seconds: float) -> httpx.AsyncClient:
    """The one client the container shares between HTTP embedders (and closes at shutdown)."""
    if timeout_seconds <= 0:
        raise ValueError(f"timeout_seconds must be positive, got {timeout_seconds}")
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_seconds),
        # Enough keep-alive connections for the worker's concurrent single-text fallback.
        limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
    )


@dataclass(frozen=True, slots=True)
class JsonAnswer:
    """A response that arrived: its status, its JSON (``None`` when not JSON) and raw text."""

    url: str
    status: int
    payload: object
    text: str
    is_json: bool
    secrets: tuple[str, ...] = ()  # header values we sent: never repeated in an error text

    def error_detail(self) -> str:
        """The server's own words about an error, shortened to one line."""
        payload = self.payload
        if isinstance(payload, dict):
            error = payload.get("error", payload.get("detail"))
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return self._clean(error["message"])
            if error is not None:
                return self._clean(error if isinstance(error, str) else json.dumps(error))
        return self._clean(self.text) or "(empty body)"

    def _clean(self, text: str) -> str:
        return _one_line(redact(text, self.secrets) or "")


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    body: object,
    *,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
) -> JsonAnswer:
    """POST ``body`` as JSON; raises ``EmbeddingError`` only when no response arrived. No error
    text ever repeats a header value sent (an API key) or anything shaped like a credential."""
    secrets = tuple(v for v in (headers or {}).values() if v)
    for value in list(secrets):
        scheme, _, token = value.partition(" ")
        if token:
            secrets += (token,)
    try:
        # ``timeout``: a caller on a query path waits less than the client's default allows.
        response = await client.post(url, json=body, headers=headers,
                                     timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout)
    except httpx.TimeoutException as error:
        raise EmbeddingError(
            f"{url}: timed out after {_timeout_of(client)} ({type(error).__name__})"
        ) from error
    except httpx.ConnectError as error:
        raise EmbeddingError(
            f"{url}: cannot connect, connection refused or host unreachable "
            f"({_one_line(redact(str(error), secrets) or '') or type(error).__name__})"
        ) from error
    except httpx.HTTPError as error:
        # e.g. the server closed the connection without answering.
        raise EmbeddingError(
            f"{url}: request failed ({type(error).__name__}: {_one_line(redact(str(error), secrets) or '')})"
        ) from error
    text = response.text
    try:
        payload, is_json = json.loads(text), True
    except ValueError:
        payload, is_json = None, False
    return JsonAnswer(url=url, status=response.status_code, payload=payload, text=text, is_json=is_json,
                      secrets=secrets)


def ok_payload(answer: JsonAnswer) -> object:
    """The JSON of a successful answer; an error status or a non-JSON body raises."""
    if answer.status >= 400:
        raise EmbeddingError(f"{answer.url}: HTTP {answer.status}: {answer.error_detail()}",
                             permanent=answer.status in INPUT_REFUSED)
    if not answer.is_json:
        raise EmbeddingError(
            f"{answer.url}: malformed JSON in HTTP {answer.status} response: "
            f"{answer._clean(answer.text) or '(empty body)'}"
        )
    return answer.payload


def field(payload: object, name: str, url: str) -> object:
    """``payload[name]`` of a JSON object, or an ``EmbeddingError`` saying it is missing."""
    if not isinstance(payload, dict) or name not in payload:
        raise EmbeddingError(f"{url}: response has no {name!r} field: {_one_line(json.dumps(payload))}")
    return payload[name]


def _timeout_of(client: httpx.AsyncClient) -> str:
    seconds = client.timeout.read
    return f"{seconds:g}s" if seconds is not None else "the client timeout"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _SNIPPET else line[: _SNIPPET - 1] + "…"
