"""Concept-based retrieval."""

from __future__ import annotations

from typing import ClassVar

from .config import ConceptConfig, RetrieverConfig
from .graph import GraphRetriever


class ConceptRetriever(GraphRetriever):
    """Concept-based retrieval: the concepts the question names (stored names matched as phrases in
    it) seed a Personalized PageRank over their chunks and the concepts those chunks mention; no
    dense seeds, no BM25. The KNN chunks fill the ranking up to k when the walk finds fewer
    documents. The published pattern (KNN over concept embeddings walked to chunks) is kept as
    ``search_concepts_published.surql`` for comparison."""

    mode = "concept"
    config_class: ClassVar[type[RetrieverConfig]] = ConceptConfig
    config: ConceptConfig
