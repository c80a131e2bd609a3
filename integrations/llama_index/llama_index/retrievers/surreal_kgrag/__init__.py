"""LlamaIndex integration for surreal-kgrag: a retriever and a reranking node postprocessor over a
SurrealDB knowledge graph."""

from .answer import SurrealKGAnswerQueryEngine
from .base import SurrealKGRetriever, chunk_node
from .postprocessor import SurrealKGRerankPostprocessor, nodes_to_documents

__all__ = ["SurrealKGAnswerQueryEngine", "SurrealKGRerankPostprocessor", "SurrealKGRetriever", "chunk_node", "nodes_to_documents"]
