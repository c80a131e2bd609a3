"""Optional LLM features on any OpenAI-compatible endpoint (``pip install 'surreal-kgrag[llm]'``):

- :class:`LLMExtractor`: concepts and typed relations under an optional :class:`Ontology`, a
  drop-in concept extractor for the ingest, with retries, a persistent cache and a spaCy fallback;
  the ingest writes its relations as ``RELATES_TO`` edges with their documents.
- :func:`answer`: an answer with citations checked against the retrieved text.
- :func:`text_to_surql` and :func:`run_readonly_query`: a model-written query, run read-only (the
  ``run_surql`` agent tool of :class:`~surreal_kgrag.tools.ToolDispatcher` runs a statement the
  calling model wrote itself).

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
from .settings import LLMSettings, LLMUsage
from .text2surql import (
    GraphStatistics,
    TextToSurqlError,
    TextToSurqlResult,
    atext_to_surql,
    readonly_tool_description,
    text_to_surql,
)

__all__ = [
    "Answer",
    "AnswerConfig",
    "CheckedStatement",
    "ChunkExtraction",
    "Citation",
    "ConceptKind",
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
    "ReadonlyQueryError",
    "ReadonlyQueryResult",
    "Relation",
    "RelationType",
    "TextToSurqlError",
    "TextToSurqlResult",
    "aanswer",
    "answer",
    "arun_readonly_query",
    "atext_to_surql",
    "check_readonly",
    "default_cache_path",
    "load_ontology",
    "readonly_tool_description",
    "run_readonly_query",
    "text_to_surql",
]
