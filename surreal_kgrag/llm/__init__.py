"""Optional LLM features on any OpenAI-compatible endpoint (``pip install 'surreal-kgrag[llm]'``):

- :class:`LLMExtractor`: concepts and typed relations under an optional :class:`Ontology`, a
  drop-in concept extractor for the ingest, with retries, a persistent cache and a spaCy fallback;
  :func:`write_relations` stores the relations as ``RELATES_TO`` edges.
- :func:`answer`: an answer with citations checked against the retrieved text.
- :func:`text_to_surql` and :func:`run_readonly_query`: a model-written query, run read-only.

Nothing here is imported by the default pipeline.
"""

from .answer import Answer, AnswerConfig, Citation, aanswer, answer
from .cache import ExtractionCache, default_cache_path
from .client import LLMCallError, LLMClient, LLMError, LLMReplyError
from .extraction import ChunkExtraction, ExtractionStats, GraphExtraction, Relation
from .extractor import ExtractorConfig, LLMExtractionWarning, LLMExtractor
from .guard import CheckedStatement, ReadonlyQueryError, check_readonly
from .ontology import ConceptKind, Ontology, RelationType, load_ontology
from .readonly import ReadonlyLimits, ReadonlyQueryResult, arun_readonly_query, run_readonly_query
from .relations import (
    ConceptRelations,
    ConceptRelationsArgs,
    aadd_relations,
    add_relations,
    awrite_relations,
    concept_relations_plan,
    ensure_relation_schema,
    relation_edges,
    write_relations,
)
from .settings import LLMSettings, LLMUsage
from .text2surql import (
    GraphStatistics,
    ReadonlyQueryArgs,
    TextToSurqlError,
    TextToSurqlResult,
    atext_to_surql,
    readonly_tool_description,
    readonly_tool_plan,
    text_to_surql,
)

__all__ = [
    "Answer",
    "AnswerConfig",
    "CheckedStatement",
    "ChunkExtraction",
    "Citation",
    "ConceptKind",
    "ConceptRelations",
    "ConceptRelationsArgs",
    "ExtractionCache",
    "ExtractionStats",
    "ExtractorConfig",
    "GraphExtraction",
    "GraphStatistics",
    "LLMCallError",
    "LLMClient",
    "LLMError",
    "LLMExtractionWarning",
    "LLMExtractor",
    "LLMReplyError",
    "LLMSettings",
    "LLMUsage",
    "Ontology",
    "ReadonlyLimits",
    "ReadonlyQueryArgs",
    "ReadonlyQueryError",
    "ReadonlyQueryResult",
    "Relation",
    "RelationType",
    "TextToSurqlError",
    "TextToSurqlResult",
    "aadd_relations",
    "aanswer",
    "add_relations",
    "answer",
    "arun_readonly_query",
    "atext_to_surql",
    "awrite_relations",
    "check_readonly",
    "concept_relations_plan",
    "default_cache_path",
    "ensure_relation_schema",
    "load_ontology",
    "readonly_tool_description",
    "readonly_tool_plan",
    "relation_edges",
    "run_readonly_query",
    "text_to_surql",
    "write_relations",
]
