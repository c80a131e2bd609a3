"""Direct chunk retrieval."""

from __future__ import annotations

from .grouped import GroupedRetriever


class ChunkRetriever(GroupedRetriever):
    """Direct chunk retrieval: nearest chunk embeddings, grouped by document (``search_chunks.surql``)."""

    mode = "chunk"
    query_file = "search_chunks"
    default_candidates = 20
