"""Embeddings: local sentence-transformers models, OpenAI-compatible APIs, LangChain and LlamaIndex models.

One module per backend (``local``, ``openai_api``, ``frameworks``), what they share in ``base``
(the ``Embedder`` protocol, input checks, L2 normalisation), and ``resolve_embedder`` in ``resolve``.
Every adapter returns L2-normalised float32 numpy arrays: ``(n, d)`` for documents, ``(d,)`` for a
query.
"""

from .base import Embedder
from .frameworks import LangChainEmbedder, LlamaIndexEmbedder
from .local import DEFAULT_MODEL, SentenceTransformerEmbedder
from .openai_api import OpenAIEmbedder, openai_client
from .process import ProcessEmbedding, in_own_process
from .resolve import resolve_embedder

__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "OpenAIEmbedder",
    "ProcessEmbedding",
    "SentenceTransformerEmbedder",
    "in_own_process",
    "openai_client",
    "resolve_embedder",
]
