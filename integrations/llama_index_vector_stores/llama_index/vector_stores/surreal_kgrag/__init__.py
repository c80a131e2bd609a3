"""LlamaIndex vector store for surreal-kgrag: nodes stored in SurrealDB as a knowledge graph."""

from .base import CoreEmbedding, SurrealKGVectorStore

__all__ = ["CoreEmbedding", "SurrealKGVectorStore"]
