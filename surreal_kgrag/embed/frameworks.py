"""Embedding models of LangChain (``Embeddings``) and LlamaIndex (``BaseEmbedding``) as embedders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigurationError
from .base import BaseEmbedder, check_text, check_texts, has_attributes

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from llama_index.core.base.embeddings.base import BaseEmbedding


class LangChainEmbedder(BaseEmbedder):
    """Wraps a ``langchain_core.embeddings.Embeddings`` (its query methods embed queries)."""

    def __init__(self, embeddings: Embeddings, *, name: str | None = None) -> None:
        if not has_attributes(embeddings, "embed_documents", "embed_query"):
            raise ConfigurationError(f"{type(embeddings).__name__} is not a LangChain Embeddings object")
        self.embeddings = embeddings
        self._name = name or _framework_name("langchain", embeddings, ("model", "model_name"))

    @property
    def name(self) -> str:
        return self._name

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(self.embeddings.embed_documents(texts), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._finish([self.embeddings.embed_query(check_text(text))], 1)[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(await self.embeddings.aembed_documents(texts), len(texts))

    async def aembed_query(self, text: str) -> np.ndarray:
        return self._finish([await self.embeddings.aembed_query(check_text(text))], 1)[0]


class LlamaIndexEmbedder(BaseEmbedder):
    """Wraps a LlamaIndex ``BaseEmbedding`` (its query methods embed queries)."""

    def __init__(self, embed_model: BaseEmbedding, *, name: str | None = None) -> None:
        if not has_attributes(embed_model, "get_text_embedding_batch", "get_query_embedding"):
            raise ConfigurationError(f"{type(embed_model).__name__} is not a LlamaIndex BaseEmbedding")
        self.embed_model = embed_model
        self._name = name or _framework_name("llama_index", embed_model, ("model_name",))

    @property
    def name(self) -> str:
        return self._name

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(self.embed_model.get_text_embedding_batch(texts), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._finish([self.embed_model.get_query_embedding(check_text(text))], 1)[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(await self.embed_model.aget_text_embedding_batch(texts), len(texts))

    async def aembed_query(self, text: str) -> np.ndarray:
        return self._finish([await self.embed_model.aget_query_embedding(check_text(text))], 1)[0]


def _framework_name(prefix: str, obj: Any, attributes: tuple[str, ...]) -> str:
    for attribute in attributes:
        value = getattr(obj, attribute, None)
        if isinstance(value, str) and value and value != "unknown":
            return f"{prefix}/{value}"
    return f"{prefix}/{type(obj).__name__}"
