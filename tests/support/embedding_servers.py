"""Real HTTP embedding servers for tests, e2e runs and benchmarks.

One server speaks one of three wire formats, exactly as the real backends do:

- ``"ollama"``: ``POST /api/embed`` ``{"model", "input": str | [str]}`` ->
  ``{"model", "embeddings": [[...]], "total_duration", "load_duration", "prompt_eval_count"}``;
  an unknown model (when ``models`` is given) is a 404 ``{"error": "model ... not found"}``.
- ``"embedding-service"``: ``POST /embed`` ``{"text"}`` -> ``{"embedding": [...]}``, and with
  ``batch=True`` also ``{"texts": [...]}`` -> ``{"embeddings": [[...]]}``; with ``batch=False`` a
  batch is answered ``batch_rejection_status`` (422 like FastAPI; 200 means a body without
  ``embeddings``).
- ``"openai"``: ``POST /v1/embeddings`` ``{"model", "input": str | [str]}`` ->
  ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
  "usage"}``; ``api_key`` makes it demand ``Authorization: Bearer <key>``; ``reverse_order``
  lists ``data`` backwards (the API promises only ``index``).

The ``mode`` can be switched at any time: ``ok``; ``down`` (stops listening and drops open
connections, so clients get connection refused); ``hangup`` (accepts, then closes without an
answer); ``slow`` (answers after ``slow_seconds``, meant to exceed the client timeout);
``error500``; ``malformed`` (a 200 with broken JSON); ``wrong_dimension`` (vectors of
``dimension + 1``). ``max_chars`` refuses any request holding a longer text with a 400, as a
server does for an input over its context length (a poison record). Vectors are the HashEmbedder's: the same text always gives the same vector.

    with EmbeddingTestServer("ollama", dimension=8) as server:
        server.url; server.mode = "error500"; server.requests[-1].body; server.texts_embedded
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from adapters.embedders.hashing import hash_vector

WireFormat = Literal["ollama", "embedding-service", "openai"]
Mode = Literal["ok", "down", "hangup", "slow", "error500", "malformed", "wrong_dimension"]
WIRE_FORMATS: tuple[WireFormat, ...] = ("ollama", "embedding-service", "openai")
MODES: tuple[Mode, ...] = ("ok", "down", "hangup", "slow", "error500", "malformed", "wrong_dimension")
FAILURE_MODES: tuple[Mode, ...] = tuple(mode for mode in MODES if mode != "ok")

_PATHS = {"ollama": "/api/embed", "embedding-service": "/embed", "openai": "/v1/embeddings"}


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    body: Any  # the parsed JSON, or None when the body was not JSON
    headers: dict[str, str]


@dataclass(frozen=True)
class _Reply:
    status: int
    body: bytes


def _json(status: int, payload: object) -> _Reply:
    return _Reply(status, json.dumps(payload).encode())


class EmbeddingTestServer:
    def __init__(
        self,
        wire_format: WireFormat,
        dimension: int = 8,
        *,
        batch: bool = True,
        batch_rejection_status: int = 422,
        slow_seconds: float = 3.0,
        api_key: str | None = None,
        models: tuple[str, ...] | None = None,
        reverse_order: bool = False,
        max_chars: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if wire_format not in WIRE_FORMATS:
            raise ValueError(f"unknown wire format {wire_format!r}; one of {WIRE_FORMATS}")
        self.wire_format = wire_format
        self.dimension = dimension
        self.batch = batch
        self.batch_rejection_status = batch_rejection_status
        self.slow_seconds = slow_seconds
        self.api_key = api_key
        self.models = models
        self.reverse_order = reverse_order
        self.max_chars = max_chars
        self.requests: list[ReceivedRequest] = []
        self.texts_embedded: list[str] = []
        self._host = host
        self._port = port
        self._mode: Mode = "ok"
        self._lock = threading.Lock()  # guards the records and the open connections
        self._switch = threading.Lock()  # serialises listen/stop
        self._connections: set[socket.socket] = set()
        self._wake = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> EmbeddingTestServer:
        with self._switch:
            self._wake.clear()
            if self._mode != "down":
                self._listen()
        return self

    def stop(self) -> None:
        with self._switch:
            self._wake.set()  # release handlers sleeping in slow mode
            self._stop_listening()

    def __enter__(self) -> EmbeddingTestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:41234`` (stable across down/up)."""
        return f"http://{self._host}:{self._port}"

    @property
    def endpoint(self) -> str:
        return self.url + _PATHS[self.wire_format]

    @property
    def mode(self) -> Mode:
        return self._mode

    @mode.setter
    def mode(self, value: Mode) -> None:
        if value not in MODES:
            raise ValueError(f"unknown mode {value!r}; one of {MODES}")
        with self._switch:
            previous, self._mode = self._mode, value
            if value == "down" and previous != "down":
                self._stop_listening()
            elif previous == "down" and value != "down":
                self._listen()

    # -- what the server saw ---------------------------------------------------------------

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def bodies(self) -> list[Any]:
        with self._lock:
            return [request.body for request in self.requests]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.texts_embedded.clear()

    # -- internals -------------------------------------------------------------------------

    def _listen(self) -> None:
        server = _Server((self._host, self._port), _Handler, owner=self)
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name=f"embedding-test-server-{self._port}",
        )
        self._thread.start()

    def _stop_listening(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        # Kept-alive connections would otherwise go on being served by their handler threads.
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def _reply(self, path: str, raw: bytes, headers: dict[str, str]) -> _Reply | None:
        """The reply to one request, or None to hang up without one."""
        mode = self._mode
        if mode == "down":
            return None
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(ReceivedRequest(path, body, headers))
        if mode == "hangup":
            return None
        if mode == "slow":
            if self._wake.wait(self.slow_seconds):
                return None
        if mode == "error500":
            return _json(500, {"error": "simulated internal server error"})
        if mode == "malformed":
            return _Reply(200, b'{"embeddings": [[0.1, 0.2')
        if path != _PATHS[self.wire_format]:
            return _json(404, {"error": f"no route for POST {path}"})
        if not isinstance(body, dict):
            return _json(400, {"error": "body must be a JSON object"})
        if self.max_chars is not None and any(len(t) > self.max_chars for t in _texts_of(body)):
            # What Ollama and OpenAI-compatible servers say of an input over the context length.
            return _json(400, {"error": f"the input length exceeds the context length ({self.max_chars})"})
        size = self.dimension + 1 if mode == "wrong_dimension" else self.dimension
        reply, texts = self._answer(body, headers, size)
        if mode == "ok" and texts:
            with self._lock:
                self.texts_embedded.extend(texts)
        return reply

    def _answer(self, body: dict[str, Any], headers: dict[str, str], size: int) -> tuple[_Reply, list[str]]:
        if self.wire_format == "embedding-service":
            return self._embedding_service(body, size)
        if self.wire_format == "ollama":
            return self._ollama(body, size)
        return self._openai(body, headers, size)

    def _embedding_service(self, body: dict[str, Any], size: int) -> tuple[_Reply, list[str]]:
        if "texts" in body:
            if not self.batch:
                if self.batch_rejection_status < 300:
                    return _json(self.batch_rejection_status, {"detail": "field 'text' is required"}), []
                return _json(self.batch_rejection_status, {"detail": [{"loc": ["body", "text"], "msg": "field required"}]}), []
            texts = body["texts"]
            if not _is_text_list(texts):
                return _json(422, {"detail": "texts must be a list of strings"}), []
            return _json(200, {"embeddings": [hash_vector(t, size) for t in texts]}), texts
        text = body.get("text")
        if not isinstance(text, str):
            return _json(422, {"detail": "text must be a string"}), []
        return _json(200, {"embedding": hash_vector(text, size)}), [text]

    def _ollama(self, body: dict[str, Any], size: int) -> tuple[_Reply, list[str]]:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return _json(400, {"error": "model is required"}), []
        if self.models is not None and model not in self.models:
            return _json(404, {"error": f'model "{model}" not found, try pulling it first'}), []
        texts = _input_texts(body.get("input"))
        if texts is None:
            return _json(400, {"error": "invalid input type"}), []
        payload = {
            "model": model,
            "embeddings": [hash_vector(t, size) for t in texts],
            "total_duration": 14_143_917,
            "load_duration": 1_019_500,
            "prompt_eval_count": sum(len(t.split()) for t in texts),
        }
        return _json(200, payload), texts

    def _openai(self, body: dict[str, Any], headers: dict[str, str], size: int) -> tuple[_Reply, list[str]]:
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            # Like some upstreams, echo what was sent: the service must never repeat it.
            sent = headers.get("authorization", "").removeprefix("Bearer ")
            error = {"message": f"Incorrect API key provided: {sent}", "type": "invalid_request_error"}
            return _json(401, {"error": error}), []
        model = body.get("model")
        texts = _input_texts(body.get("input"))
        if not isinstance(model, str) or texts is None:
            error = {"message": "'model' and 'input' are required", "type": "invalid_request_error"}
            return _json(400, {"error": error}), []
        data = [
            {"object": "embedding", "index": index, "embedding": hash_vector(text, size)}
            for index, text in enumerate(texts)
        ]
        if self.reverse_order:
            data.reverse()
        tokens = sum(len(t.split()) for t in texts)
        payload = {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return _json(200, payload), texts


def _texts_of(body: dict[str, Any]) -> list[str]:
    found = body.get("texts", body.get("input", body.get("text")))
    if isinstance(found, str):
        return [found]
    return [t for t in found if isinstance(t, str)] if isinstance(found, list) else []


def _is_text_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _input_texts(value: object) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    return value if _is_text_list(value) else None  # type: ignore[return-value]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog is 5: a client opening its concurrent connections at
    # once overflowed it, the kernel dropped the SYNs and the client's 0.5 s connect timeout fired
    # before the 1 s SYN retry (a flaky ConnectTimeout). Real backends listen with a deep backlog.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: EmbeddingTestServer) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients that time out and go away are part of the tests, not errors worth a traceback.
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real backends
    timeout = 30  # an idle kept-alive connection frees its thread eventually
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.owner._opened(self.connection)

    def finish(self) -> None:
        self.server.owner._closed(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply = self.server.owner._reply(self.path, raw, headers)
        if reply is None:
            self.close_connection = True
            return
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
        except OSError:
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        return None


def main() -> None:
    """Serve one wire format on a fixed port until interrupted (manual runs, e2e by hand)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wire_format", choices=WIRE_FORMATS)
    parser.add_argument("--port", type=int, default=3003)
    parser.add_argument("--dimension", type=int, default=768)
    parser.add_argument("--no-batch", action="store_true", help="embedding-service without batches")
    args = parser.parse_args()
    server = EmbeddingTestServer(args.wire_format, args.dimension, batch=not args.no_batch, port=args.port)
    with server:
        print(f"{args.wire_format} embedding server on {server.endpoint}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
