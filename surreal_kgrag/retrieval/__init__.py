"""Retrievers: embed the query, run parameterised SurrealQL from ``surql/``, shape typed results.

Every retriever follows one template (:mod:`.base`): ``search()`` runs ``plan()`` -- the queries,
written once as a sans-I/O plan (:mod:`.plan`) so the sync and async paths and the agent tools share
them -- then an optional reranker, and returns exactly ``k`` results when that many match.

- ``ChunkRetriever``: KNN over chunk embeddings, grouped by document (``search_chunks.surql``).
- ``ConceptRetriever``: the concepts the question names (stored names matched as phrases) seed a
  Personalized PageRank over their chunks and those chunks' concepts (:mod:`.walk`).
- ``HybridRetriever``: chunk vectors + BM25 on chunk content + the concepts the query names,
  fused by reciprocal rank (or weighted scores).
- ``GraphRetriever``: multi-hop; the question's named concepts, nearest chunks and BM25 chunks seed
  a Personalized PageRank over the bounded subgraph around them (one round trip), fused with BM25.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..db import SurrealStore
from .base import BaseRetriever
from .chunk import ChunkRetriever
from .concept import ConceptRetriever
from .config import ChunkConfig, ConceptConfig, GraphConfig, HybridConfig, Mode, RetrieverConfig
from .filters import FilterError, compile_filter
from .graph import GraphRetriever
from .hybrid import HybridRetriever, content_words
from .request import Request
from .results import Channel, ChunkHit, ConceptMatch, ProvenancePath, RetrievalResult, RetrievedDocument, Timings
from .scope import UNRESTRICTED, Scope

__all__ = [
    "RETRIEVERS",
    "UNRESTRICTED",
    "BaseRetriever",
    "Channel",
    "ChunkConfig",
    "ChunkHit",
    "ChunkRetriever",
    "ConceptConfig",
    "ConceptMatch",
    "ConceptRetriever",
    "FilterError",
    "GraphConfig",
    "GraphRetriever",
    "HybridConfig",
    "HybridRetriever",
    "Mode",
    "ProvenancePath",
    "Request",
    "RetrievalResult",
    "RetrievedDocument",
    "RetrieverConfig",
    "Scope",
    "Timings",
    "check_retriever_options",
    "compile_filter",
    "content_words",
    "make_retriever",
]

RETRIEVERS: dict[str, type[BaseRetriever]] = {
    "chunk": ChunkRetriever,
    "concept": ConceptRetriever,
    "hybrid": HybridRetriever,
    "graph": GraphRetriever,
}


def make_retriever(mode: str, store: SurrealStore, **kwargs: Any) -> BaseRetriever:
    """Build the retriever for ``mode`` (chunk, concept, hybrid, graph); options go to its config."""
    return _retriever_class(mode)(store, **kwargs)


def check_retriever_options(mode: str, **kwargs: Any) -> None:
    """Raise what :func:`make_retriever` would for ``mode`` and ``kwargs`` (an unknown mode, an
    option its config does not have or a value it refuses), without a store: for the integrations,
    whose constructors connect on first use."""
    cls = _retriever_class(mode)
    arguments = {  # what the constructors take themselves (embedder, scope, hybrid's extractor, ...)
        parameter.name
        for klass in cls.__mro__
        if "__init__" in vars(klass)
        for parameter in inspect.signature(vars(klass)["__init__"]).parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    cls.config_class(**{name: value for name, value in kwargs.items() if name not in arguments})


def _retriever_class(mode: str) -> type[BaseRetriever]:
    try:
        return RETRIEVERS[mode]
    except KeyError:
        raise ValueError(f"unknown mode {mode!r}: choose one of {', '.join(RETRIEVERS)}") from None
