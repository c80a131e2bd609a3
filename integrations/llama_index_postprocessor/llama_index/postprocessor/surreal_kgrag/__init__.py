"""LlamaIndex node postprocessor for surreal-kgrag: any core reranker over retrieved nodes."""

from .base import SurrealKGRerankPostprocessor, nodes_to_documents

__all__ = ["SurrealKGRerankPostprocessor", "nodes_to_documents"]
