"""A real HTTP reranking server for tests, speaking one of two wire formats as the real ones do:

- ``"tei"``: ``POST /rerank`` ``{"query", "texts", "raw_scores"?, "truncate"?}`` ->
  ``[{"index", "score"}, ...]`` best first (Hugging Face text-embeddings-inference);
- ``"openai"``: ``POST /v1/rerank`` ``{"model"?, "query", "documents", "top_n"?}`` ->
  ``{"id", "model", "results": [{"index", "relevance_score", "document": {"text"}}], "usage"}``
  best first (vLLM, Jina, Cohere-style).

A text's score is the share of the query's words it holds. ``mode``: ``ok``, ``error500``,
``malformed`` (a 200 that is not JSON), ``partial`` (a score missing for the last text).

    with RerankTestServer("tei") as server:
        server.url; server.mode = "error500"; server.requests[-1]
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

RerankWire = Literal["tei", "openai"]
_WORD = re.compile(r"\w+")


def overlap(query: str, text: str) -> float:
    wanted = set(_WORD.findall(query.casefold()))
    return len(wanted & set(_WORD.findall(text.casefold()))) / max(1, len(wanted))


class RerankTestServer:
    def __init__(self, wire: RerankWire) -> None:
        self.wire = wire
        self.mode = "ok"
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet test output
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
                owner.requests.append({"path": self.path, "body": body})
                status, payload = owner.answer(self.path, body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def answer(self, path: str, body: dict) -> tuple[int, object]:
        expected = "/rerank" if self.wire == "tei" else "/v1/rerank"
        if path != expected:
            return 404, {"error": f"no route {path}"}
        if self.mode == "error500":
            return 500, {"error": "model crashed"}
        if self.mode == "malformed":
            return 200, b"<html>not json"
        texts = body["texts"] if self.wire == "tei" else body["documents"]
        scored = sorted(((overlap(body["query"], t), i) for i, t in enumerate(texts)), key=lambda s: (-s[0], s[1]))
        if self.mode == "partial":
            scored = [s for s in scored if s[1] != len(texts) - 1]
        if self.wire == "tei":
            return 200, [{"index": i, "score": score} for score, i in scored]
        return 200, {"id": "rerank-1", "model": body.get("model", "default"), "usage": {"total_tokens": 1},
                     "results": [{"index": i, "relevance_score": score, "document": {"text": texts[i]}}
                                 for score, i in scored]}

    def __enter__(self) -> RerankTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
