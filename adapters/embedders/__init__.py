"""Embedder adapters: HTTP embedding service, Ollama, OpenAI-compatible, in-process models
(numpy by default, sentence-transformers on torch), hashing.

Importing this package loads no model and opens no connection; numpy, tokenizers and
safetensors (or sentence-transformers and torch) are imported only when a model loads.
"""

from adapters.embedders.embedding_service import EmbeddingServiceEmbedder
from adapters.embedders.hashing import HashEmbedder
from adapters.embedders.http import make_http_client
from adapters.embedders.local import LocalEmbedder, SentenceTransformersEmbedder, resolve_model_path
from adapters.embedders.ollama import OllamaEmbedder
from adapters.embedders.openai import OpenAIEmbedder

__all__ = [
    "EmbeddingServiceEmbedder",
    "HashEmbedder",
    "LocalEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformersEmbedder",
    "make_http_client",
    "resolve_model_path",
]
