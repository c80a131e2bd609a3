"""``resolve_embedder``: an embedder from a setting (a name, a model object, or nothing)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, cast

from ..errors import ConfigurationError
from .base import BaseEmbedder, Embedder, has_attributes
from .frameworks import LangChainEmbedder, LlamaIndexEmbedder
from .local import SentenceTransformerEmbedder
from .openai_api import OpenAIEmbedder


def resolve_embedder(spec: Any = None) -> Embedder:
    """Build an embedder from a setting.

    ``None`` -> MiniLM; ``"openai:<model>"`` -> :class:`OpenAIEmbedder`; another string -> a
    sentence-transformers model name or path; an :class:`Embedder` -> itself; a LangChain
    ``Embeddings``, LlamaIndex ``BaseEmbedding`` or ``SentenceTransformer`` -> its adapter.
    """
    if spec is None:
        return SentenceTransformerEmbedder()
    if isinstance(spec, str):
        if spec.startswith("openai:"):
            model = spec.removeprefix("openai:").strip()
            if not model:
                raise ConfigurationError("'openai:' needs a model name, e.g. 'openai:text-embedding-3-small'")
            return OpenAIEmbedder(model)
        return SentenceTransformerEmbedder(spec)
    if isinstance(spec, BaseEmbedder):
        return cast(Embedder, spec)
    # An object of these classes implies its module was imported, so nothing is imported here.
    adapters: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
        ("langchain_core.embeddings", "Embeddings", LangChainEmbedder),
        ("llama_index.core.base.embeddings.base", "BaseEmbedding", LlamaIndexEmbedder),
        ("sentence_transformers", "SentenceTransformer", SentenceTransformerEmbedder),
    )
    for module, cls, adapter in adapters:
        base = getattr(sys.modules.get(module), cls, None)
        if isinstance(base, type) and isinstance(spec, base):
            return cast(Embedder, adapter(spec))
    if has_attributes(spec, "name", "dimension", "embed_documents", "embed_query", "aembed_documents", "aembed_query"):
        return cast(Embedder, spec)
    if has_attributes(spec, "get_text_embedding_batch", "get_query_embedding"):
        return LlamaIndexEmbedder(spec)
    if has_attributes(spec, "embed_documents", "embed_query"):
        return LangChainEmbedder(spec)
    raise ConfigurationError(
        f"cannot use {type(spec).__name__} as an embedder; pass None, a sentence-transformers model name, "
        "'openai:<model>', an Embedder, or a LangChain / LlamaIndex embedding model"
    )
