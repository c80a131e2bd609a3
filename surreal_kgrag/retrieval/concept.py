"""Concept-based retrieval."""

from __future__ import annotations

from .grouped import GroupedRetriever


class ConceptRetriever(GroupedRetriever):
    """Concept-based retrieval: nearest concepts, then the chunks that mention them, grouped by
    document (``search_concepts.surql``)."""

    mode = "concept"
    query_file = "search_concepts"
    default_candidates = 10
    filtered_chunk_knn = False  # the concept KNN is not filtered; the walk to the chunks is
