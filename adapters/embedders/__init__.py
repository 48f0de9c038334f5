"""Embedder adapters: HTTP embedding service, Ollama, OpenAI-compatible, local model, hashing.

Importing this package loads no model and opens no connection; sentence-transformers is
imported only when a LocalEmbedder first embeds.
"""

from adapters.embedders.embedding_service import EmbeddingServiceEmbedder
from adapters.embedders.hashing import HashEmbedder
from adapters.embedders.http import make_http_client
from adapters.embedders.local import LocalEmbedder, resolve_model_path
from adapters.embedders.ollama import OllamaEmbedder
from adapters.embedders.openai import OpenAIEmbedder

__all__ = [
    "EmbeddingServiceEmbedder",
    "HashEmbedder",
    "LocalEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "make_http_client",
    "resolve_model_path",
]
