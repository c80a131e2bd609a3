"""LlamaIndex integration for surreal-kgrag: a retriever (and cited-answer query engine) over a SurrealDB
knowledge graph. The reranking postprocessor is ``llama_index.postprocessor.surreal_kgrag`` and the
vector store ``llama_index.vector_stores.surreal_kgrag`` (their own distributions)."""

from .answer import SurrealKGAnswerQueryEngine
from .base import SurrealKGRetriever, chunk_node
from .filters import UnsupportedFilterError, to_core_filter

__all__ = ["SurrealKGAnswerQueryEngine", "SurrealKGRetriever", "UnsupportedFilterError", "chunk_node", "to_core_filter"]
