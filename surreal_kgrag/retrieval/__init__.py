"""Retrievers: embed the query, run parameterised SurrealQL from ``surql/``, shape typed results.

Every retriever follows one template (:mod:`.base`): ``search()`` runs ``plan()`` -- the queries,
written once as a sans-I/O plan (:mod:`.plan`) so the sync and async paths and the agent tools share
them -- then an optional reranker, and returns exactly ``k`` results when that many match.

- ``ChunkRetriever``: KNN over chunk embeddings, grouped by document (``search_chunks.surql``).
- ``ConceptRetriever``: KNN over concept embeddings, walked to the chunks that mention them.
- ``HybridRetriever``: chunk vectors + BM25 on chunk content + the concepts named in the query,
  fused by reciprocal rank (or weighted scores).
- ``GraphRetriever``: hybrid, then expands from the best documents along ``MENTIONS_CONCEPT`` to
  chunks of other documents that share rare concepts, for answers that span documents.
"""

from __future__ import annotations

from typing import Any

from ..store import SurrealStore
from .base import BaseRetriever, Request
from .chunk import ChunkRetriever
from .concept import ConceptRetriever
from .config import GraphConfig, HybridConfig, Mode, RetrieverConfig
from .filters import FilterError, compile_filter
from .graph import GraphRetriever
from .hybrid import HybridRetriever, content_words
from .results import Channel, ChunkHit, ConceptMatch, ProvenancePath, RetrievalResult, RetrievedDocument
from .scope import UNRESTRICTED, Scope

__all__ = [
    "RETRIEVERS",
    "UNRESTRICTED",
    "BaseRetriever",
    "Channel",
    "ChunkHit",
    "ChunkRetriever",
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
    try:
        cls = RETRIEVERS[mode]
    except KeyError:
        raise ValueError(f"unknown mode {mode!r}: choose one of {', '.join(RETRIEVERS)}") from None
    return cls(store, **kwargs)
