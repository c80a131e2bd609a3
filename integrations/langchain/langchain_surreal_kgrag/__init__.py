"""LangChain integration for surreal-kgrag: a retriever, a vector store and an agent tool over a SurrealDB knowledge graph."""

from .answer import create_answer_runnable
from .retrievers import SurrealKGRetriever
from .tools import KnowledgeGraphSearchInput, create_kg_search_tool, format_documents
from .vectorstores import SurrealKGVectorStore

__all__ = [
    "KnowledgeGraphSearchInput",
    "SurrealKGRetriever",
    "SurrealKGVectorStore",
    "create_answer_runnable",
    "create_kg_search_tool",
    "format_documents",
]
