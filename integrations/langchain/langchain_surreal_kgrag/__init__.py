"""LangChain integration for surreal-kgrag: a retriever and an agent tool over a SurrealDB knowledge graph."""

from .retrievers import SurrealKGRetriever
from .tools import KnowledgeGraphSearchInput, create_kg_search_tool, format_documents

__all__ = ["KnowledgeGraphSearchInput", "SurrealKGRetriever", "create_kg_search_tool", "format_documents"]
