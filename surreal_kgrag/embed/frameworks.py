"""Embedding models of LangChain (``Embeddings``) and LlamaIndex (``BaseEmbedding``) as embedders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..errors import ConfigurationError
from .base import BaseEmbedder, check_text, check_texts, has_attributes

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from llama_index.core.base.embeddings.base import BaseEmbedding


class _FrameworkEmbedder(BaseEmbedder):
    """A framework's embedding model, called through the four methods ``_calls`` names: documents,
    query, and their async twins (its query methods embed queries). ``embeds_elsewhere``: the model
    is a remote service (OpenAI's, Cohere's, an inference server), so a search runs its queries that
    need no vector while it embeds the question; a model that runs in this process must not say so."""

    _calls: ClassVar[tuple[str, str, str, str]]

    def __init__(self, model: Any, name: str, embeds_elsewhere: bool = False) -> None:
        self._model = model
        self._name = name
        self.embeds_elsewhere = embeds_elsewhere

    @property
    def name(self) -> str:
        return self._name

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(getattr(self._model, self._calls[0])(texts), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._finish([getattr(self._model, self._calls[1])(check_text(text))], 1)[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(await getattr(self._model, self._calls[2])(texts), len(texts))

    async def aembed_query(self, text: str) -> np.ndarray:
        return self._finish([await getattr(self._model, self._calls[3])(check_text(text))], 1)[0]


class LangChainEmbedder(_FrameworkEmbedder):
    """Wraps a ``langchain_core.embeddings.Embeddings`` (its query methods embed queries)."""

    _calls = ("embed_documents", "embed_query", "aembed_documents", "aembed_query")

    def __init__(self, embeddings: Embeddings, *, name: str | None = None, embeds_elsewhere: bool = False) -> None:
        if not has_attributes(embeddings, "embed_documents", "embed_query"):
            raise ConfigurationError(f"{type(embeddings).__name__} is not a LangChain Embeddings object")
        self.embeddings = embeddings
        super().__init__(embeddings, name or _framework_name("langchain", embeddings, ("model", "model_name")), embeds_elsewhere)


class LlamaIndexEmbedder(_FrameworkEmbedder):
    """Wraps a LlamaIndex ``BaseEmbedding`` (its query methods embed queries)."""

    _calls = ("get_text_embedding_batch", "get_query_embedding", "aget_text_embedding_batch", "aget_query_embedding")

    def __init__(self, embed_model: BaseEmbedding, *, name: str | None = None, embeds_elsewhere: bool = False) -> None:
        if not has_attributes(embed_model, "get_text_embedding_batch", "get_query_embedding"):
            raise ConfigurationError(f"{type(embed_model).__name__} is not a LlamaIndex BaseEmbedding")
        self.embed_model = embed_model
        super().__init__(embed_model, name or _framework_name("llama_index", embed_model, ("model_name",)), embeds_elsewhere)


def _framework_name(prefix: str, obj: Any, attributes: tuple[str, ...]) -> str:
    for attribute in attributes:
        value = getattr(obj, attribute, None)
        if isinstance(value, str) and value and value != "unknown":
            return f"{prefix}/{value}"
    return f"{prefix}/{type(obj).__name__}"
