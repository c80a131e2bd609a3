"""surreal-kgrag: knowledge-graph retrieval on SurrealDB (documents, chunks, concepts)."""

from .chunking import SentenceChunker
from .db import StoreConfig, SurrealStore
from .errors import (
    ConfigurationError,
    KGRagError,
    LoaderError,
    ModelNotAvailableError,
    QueryExecutionError,
    SchemaMismatchError,
    ScopeError,
    StoreConnectionError,
    StoreLockedError,
)
from .ingest import IngestConfig, Ingestor, delete_documents
from .models import ConceptMention, IngestSummary, LoadFailure, SourceDocument, StoreStats, TextChunk
from .rerank import (
    ConceptOverlapReranker,
    CrossEncoderReranker,
    LLMReranker,
    MMRReranker,
    Reranker,
    RerankerChain,
    RerankWarning,
)
from .retrieval import (
    ChunkConfig,
    ChunkHit,
    ChunkRetriever,
    ConceptMatch,
    ConceptRetriever,
    GraphConfig,
    GraphRetriever,
    HybridConfig,
    HybridRetriever,
    ProvenancePath,
    RetrievalResult,
    RetrievedDocument,
    RetrieverConfig,
    Scope,
    make_retriever,
)
from .retrieval.filters import FilterError, compile_filter
from .schema import IndexSettings, ensure_schema
from .stats import get_stats
from .tools import ToolDispatcher, ToolError

__version__ = "0.1.0"

__all__ = [
    "ChunkConfig",
    "ChunkHit",
    "ChunkRetriever",
    "ConceptMatch",
    "ConceptMention",
    "ConceptOverlapReranker",
    "ConceptRetriever",
    "ConfigurationError",
    "CrossEncoderReranker",
    "FilterError",
    "GraphConfig",
    "GraphRetriever",
    "HybridConfig",
    "HybridRetriever",
    "IndexSettings",
    "IngestConfig",
    "IngestSummary",
    "Ingestor",
    "KGRagError",
    "LLMReranker",
    "LoadFailure",
    "LoaderError",
    "MMRReranker",
    "ModelNotAvailableError",
    "ProvenancePath",
    "QueryExecutionError",
    "RerankWarning",
    "Reranker",
    "RerankerChain",
    "RetrievalResult",
    "RetrievedDocument",
    "RetrieverConfig",
    "SchemaMismatchError",
    "Scope",
    "ScopeError",
    "SentenceChunker",
    "SourceDocument",
    "StoreConfig",
    "StoreConnectionError",
    "StoreLockedError",
    "StoreStats",
    "SurrealStore",
    "TextChunk",
    "ToolDispatcher",
    "ToolError",
    "compile_filter",
    "delete_documents",
    "ensure_schema",
    "get_stats",
    "make_retriever",
]
