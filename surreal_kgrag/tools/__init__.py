"""Framework-free agent tools: small typed operations over the knowledge graph that an LLM composes.

Each tool is a pydantic argument model, a pydantic result model and a plan over
``surql/tool_*.surql``. :class:`ToolDispatcher` publishes the tools' JSON schemas in OpenAI's
function-calling format and runs calls: ``call()`` / ``acall()`` return JSON, and a bad call (unknown
tool, malformed JSON, invalid arguments, unknown concept or document, a failing store) comes back as
``{"error": {"type", "message", "details"}}`` for the model to read and correct, never as an
exception in the agent loop. ``invoke()`` / ``ainvoke()`` return the typed result and raise instead.

>>> tools = ToolDispatcher(store)
>>> response = client.chat.completions.create(model=..., messages=..., tools=tools.schemas())
>>> for call in response.choices[0].message.tool_calls:
...     content = tools.call(call.function.name, call.function.arguments)
"""

from __future__ import annotations

from .catalogue import RUN_SURQL, TOOLS, Tool, ToolContext
from .dispatcher import ToolDispatcher
from .errors import (
    InvalidArgumentsError,
    NotFoundError,
    ToolError,
    UnknownToolError,
    UnsupportedArgumentError,
    error_payload,
)
from .models import (
    ChunkSearchResult,
    ChunksForConceptArgs,
    ConceptChunk,
    ConceptChunks,
    ConceptDocument,
    ConceptDocuments,
    ConceptHit,
    ConceptInfo,
    ConceptRelation,
    ConceptRelations,
    ConceptRelationsArgs,
    ConceptSearchResult,
    DocumentChunk,
    DocumentHit,
    DocumentsForConceptArgs,
    DocumentView,
    GetDocumentArgs,
    Passage,
    ReadonlyQueryArgs,
    RelatedConcept,
    RelatedConcepts,
    RelatedConceptsArgs,
    SearchChunksArgs,
    SearchConceptsArgs,
    ToolArguments,
)

__all__ = [
    "RUN_SURQL",
    "TOOLS",
    "ChunkSearchResult",
    "ChunksForConceptArgs",
    "ConceptChunk",
    "ConceptChunks",
    "ConceptDocument",
    "ConceptDocuments",
    "ConceptHit",
    "ConceptInfo",
    "ConceptRelation",
    "ConceptRelations",
    "ConceptRelationsArgs",
    "ConceptSearchResult",
    "DocumentChunk",
    "DocumentHit",
    "DocumentView",
    "DocumentsForConceptArgs",
    "GetDocumentArgs",
    "InvalidArgumentsError",
    "NotFoundError",
    "Passage",
    "ReadonlyQueryArgs",
    "RelatedConcept",
    "RelatedConcepts",
    "RelatedConceptsArgs",
    "SearchChunksArgs",
    "SearchConceptsArgs",
    "Tool",
    "ToolArguments",
    "ToolContext",
    "ToolDispatcher",
    "ToolError",
    "UnknownToolError",
    "UnsupportedArgumentError",
    "error_payload",
]
