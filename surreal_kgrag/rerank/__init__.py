"""Rerankers: reorder (and rescore) the documents a retriever returned.

Every reranker takes ``rerank(query, documents, *, k=None, query_embedding=None)`` and returns new
``RetrievedDocument`` copies with updated ``score``, best first, at most ``k`` of them; the input list
and its documents are never changed. ``arerank`` is the async twin. Rerankers compose left to right:
``MMRReranker(store) | ConceptOverlapReranker(store)`` (or ``RerankerChain([...])``) runs MMR first and
hands its output to the concept reranker; only the last stage cuts to ``k``.

- :class:`MMRReranker`: maximal marginal relevance over the stored embeddings of each document's best chunk.
- :class:`CrossEncoderReranker`: a sentence-transformers ``CrossEncoder`` scores (query, passage) pairs.
- :class:`LLMReranker`: an OpenAI-compatible chat model orders numbered passages; on any failure the
  input order is kept and a :class:`RerankWarning` says why.
- :class:`ConceptOverlapReranker`: boosts documents whose chunks mention the query's concepts.
"""

from __future__ import annotations

from typing import Any

from ..db import SurrealStore
from ..errors import ConfigurationError
from .base import Reranker, RerankerChain, RerankerLike, RerankWarning, passage_text
from .concept_overlap import ConceptOverlapReranker
from .cross_encoder import CrossEncoderReranker
from .llm import LLMReranker
from .mmr import MMRReranker, maximal_marginal_relevance

__all__ = [
    "ConceptOverlapReranker",
    "CrossEncoderReranker",
    "LLMReranker",
    "MMRReranker",
    "RerankWarning",
    "Reranker",
    "RerankerChain",
    "RerankerLike",
    "make_reranker",
    "maximal_marginal_relevance",
    "passage_text",
]

_STORE_RERANKERS: dict[str, type[MMRReranker] | type[ConceptOverlapReranker]] = {
    "mmr": MMRReranker,
    "concept": ConceptOverlapReranker,
}
_MODEL_RERANKERS: dict[str, type[CrossEncoderReranker] | type[LLMReranker]] = {
    "cross-encoder": CrossEncoderReranker,
    "llm": LLMReranker,
}


def make_reranker(name: str, store: SurrealStore | None = None, **options: Any) -> Reranker:
    """A reranker by name, with its constructor's options: ``"mmr"`` and ``"concept"`` need
    ``store``; ``"cross-encoder"`` and ``"llm"`` need ``model=``. For a chain, join the results:
    ``RerankerChain(make_reranker(n, store) for n in names)``."""
    if name in _STORE_RERANKERS:
        if store is None:
            raise ConfigurationError(f"the {name!r} reranker reads the store: pass store=")
        return _STORE_RERANKERS[name](store, **options)
    if name in _MODEL_RERANKERS:
        if "model" not in options:
            raise ConfigurationError(f"the {name!r} reranker needs model= (a model name, path or object)")
        return _MODEL_RERANKERS[name](**options)
    known = ", ".join([*_STORE_RERANKERS, *_MODEL_RERANKERS])
    raise ConfigurationError(f"unknown reranker {name!r}: choose one of {known}")
