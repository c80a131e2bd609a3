"""Framework-free agent tools: small typed operations over the knowledge graph that an LLM composes.

Each tool is a pydantic argument model, a pydantic result model and a parameterised query in
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

import inspect
import json
import logging
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from surrealdb import RecordID

from .embed import Embedder, resolve_embedder
from .errors import (
    ConfigurationError,
    KGRagError,
    ModelNotAvailableError,
    QueryExecutionError,
    SchemaMismatchError,
    StoreConnectionError,
)
from .extract import normalise_concept
from .ids import concept_id, document_id
from .retrieve import BaseRetriever, RetrievalResult, make_retriever
from .store import SurrealStore

__all__ = [
    "TOOLS",
    "ChunkSearchResult",
    "ChunksForConceptArgs",
    "ConceptChunk",
    "ConceptChunks",
    "ConceptDocument",
    "ConceptDocuments",
    "ConceptHit",
    "ConceptInfo",
    "ConceptSearchResult",
    "DocumentChunk",
    "DocumentHit",
    "DocumentView",
    "DocumentsForConceptArgs",
    "GetDocumentArgs",
    "InvalidArgumentsError",
    "NotFoundError",
    "Passage",
    "RelatedConcept",
    "RelatedConcepts",
    "RelatedConceptsArgs",
    "SearchChunksArgs",
    "SearchConceptsArgs",
    "Tool",
    "ToolArguments",
    "ToolDispatcher",
    "ToolError",
    "UnknownToolError",
    "UnsupportedArgumentError",
    "error_payload",
]

logger = logging.getLogger(__name__)

MAX_K = 50
_EF = 80  # HNSW search breadth for concept search; at least k
_SUGGESTIONS = 5  # nearest concepts offered when a concept name is not found

# --------------------------------------------------------------------------------------------------
# Arguments (what the model sends). Strict: "3" is not an integer, unknown fields are rejected,
# surrounding whitespace is dropped (so "  " is an empty query).


class ToolArguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, str_strip_whitespace=True)


class SearchChunksArgs(ToolArguments):
    query: str = Field(min_length=1, max_length=2000, description="what to look for, in natural language")
    k: int = Field(5, ge=1, le=MAX_K, description="how many documents to return, best first")
    chunks_per_document: int = Field(2, ge=1, le=10, description="how many matching passages to show per document")
    filters: dict[str, Any] = Field(
        default_factory=dict,
        description='metadata filter, Mongo-like, e.g. {"metadata.year": {"$gte": 2000}}; omit for none',
    )


class SearchConceptsArgs(ToolArguments):
    query: str = Field(min_length=1, max_length=2000, description="a name, term or topic")
    k: int = Field(10, ge=1, le=MAX_K, description="how many concepts to return, most similar first")


class _ConceptArgs(ToolArguments):
    concept: str = Field(
        min_length=1,
        max_length=300,
        description="a concept name as search_concepts returns it (e.g. 'marie curie'); case, articles and "
        "punctuation are normalised",
    )


class ChunksForConceptArgs(_ConceptArgs):
    limit: int = Field(10, ge=1, le=MAX_K, description="at most this many chunks")


class DocumentsForConceptArgs(_ConceptArgs):
    limit: int = Field(10, ge=1, le=MAX_K, description="at most this many documents")


class RelatedConceptsArgs(_ConceptArgs):
    limit: int = Field(10, ge=1, le=MAX_K, description="at most this many related concepts")


class GetDocumentArgs(ToolArguments):
    document_id: str = Field(min_length=1, max_length=4096, description="a document id as the other tools return it")
    first_chunk: int = Field(0, ge=0, le=1_000_000, description="index of the first chunk to return (to read on)")
    max_chunks: int = Field(20, ge=1, le=100, description="at most this many chunks, in document order")


# --------------------------------------------------------------------------------------------------
# Results (what the model reads)


class ConceptInfo(BaseModel):
    id: str = Field(description="the concept's normalised name, its identity in the store")
    name: str
    display: str = Field(description="how the concept was first written")
    kind: str = Field(description="entity label (PERSON, ORG, GPE...), NOUN_PHRASE or a metadata field")
    documents: int = Field(description="documents that mention it")
    chunks: int = Field(description="chunks that mention it")


class ConceptHit(ConceptInfo):
    score: float = Field(description="cosine similarity to the query")


class ConceptSearchResult(BaseModel):
    query: str
    concepts: list[ConceptHit]


class Passage(BaseModel):
    id: str
    index: int = Field(description="position of the chunk in its document")
    content: str
    score: float
    concepts: list[str] = Field(default_factory=list, description="concepts that led to this passage, if any")


class DocumentHit(BaseModel):
    id: str
    title: str | None
    source: str
    metadata: dict[str, Any]
    score: float
    chunks: list[Passage]


class ChunkSearchResult(BaseModel):
    query: str
    mode: str = Field(description="the retriever that ran: chunk, concept, hybrid, graph")
    documents: list[DocumentHit]


class ConceptChunk(BaseModel):
    id: str
    document_id: str
    document_title: str | None
    index: int
    content: str
    mentions: int = Field(description="how often this chunk mentions the concept")


class ConceptChunks(BaseModel):
    concept: ConceptInfo
    chunks: list[ConceptChunk] = Field(description="most mentions first; concept.chunks is the total")


class ConceptDocument(BaseModel):
    id: str
    title: str | None
    source: str
    metadata: dict[str, Any]
    chunks: int = Field(description="chunks of this document that mention the concept")
    mentions: int


class ConceptDocuments(BaseModel):
    concept: ConceptInfo
    documents: list[ConceptDocument] = Field(description="most mentioning chunks first; concept.documents is the total")


class RelatedConcept(BaseModel):
    id: str
    name: str
    display: str
    kind: str
    shared_chunks: int = Field(description="chunks that mention both concepts")
    shared_documents: int = Field(description="documents those shared chunks belong to")
    documents: int = Field(description="documents that mention this concept at all")


class RelatedConcepts(BaseModel):
    concept: ConceptInfo
    related: list[RelatedConcept]


class DocumentChunk(BaseModel):
    id: str
    index: int
    content: str


class DocumentView(BaseModel):
    id: str
    title: str | None
    source: str
    content_type: str
    metadata: dict[str, Any]
    chunk_count: int
    chunks: list[DocumentChunk] = Field(description="the requested page of chunks, in order")


# --------------------------------------------------------------------------------------------------
# Errors a tool reports back to the model


class ToolError(KGRagError):
    """A tool call that cannot be answered; ``type`` and ``details`` go into the error JSON."""

    type: ClassVar[str] = "tool_failed"

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = dict(details or {})


class UnknownToolError(ToolError):
    type = "unknown_tool"


class InvalidArgumentsError(ToolError, ValueError):
    type = "invalid_arguments"


class NotFoundError(ToolError, LookupError):
    type = "not_found"


class UnsupportedArgumentError(ToolError):
    type = "unsupported"


_ERROR_TYPES: tuple[tuple[type[KGRagError], str], ...] = (
    (ConfigurationError, "invalid_arguments"),
    (QueryExecutionError, "query_failed"),
    (StoreConnectionError, "store_unavailable"),
    (SchemaMismatchError, "store_mismatch"),
    (ModelNotAvailableError, "model_unavailable"),
)


def error_payload(error: KGRagError) -> dict[str, Any]:
    """``{"error": {"type", "message", "details"}}`` for an error raised by a tool."""
    if isinstance(error, ToolError):
        kind, details = error.type, error.details
    else:
        kind = next((name for cls, name in _ERROR_TYPES if isinstance(error, cls)), ToolError.type)
        details = {}
    return {"error": {"type": kind, "message": str(error), "details": details}}


# --------------------------------------------------------------------------------------------------
# Tool bodies. Each is a generator that yields the I/O it needs (an embedding, a query, a retriever
# search) and returns its result, so one body serves both the sync and the async dispatcher.


@dataclass(frozen=True)
class _Query:
    name: str
    params: dict[str, Any]
    integers: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Embed:
    text: str


@dataclass(frozen=True)
class _Search:
    query: str
    k: int
    filters: dict[str, Any]


_Step = _Query | _Embed | _Search
Plan = Generator[_Step, Any, BaseModel]


def _key(value: Any) -> str:
    return str(value.id) if isinstance(value, RecordID) else str(value)


def _nearest_concepts(embedding: list[float], k: int) -> _Query:
    return _Query("tool_search_concepts", {"embedding": embedding, "limit": k}, {"candidates": k, "ef": max(_EF, k)})


def _concept_hits(rows: list[dict[str, Any]]) -> list[ConceptHit]:
    return [ConceptHit(**{**row, "id": _key(row["id"])}) for row in rows]


def _resolve_concept(name: str) -> Generator[_Step, Any, tuple[ConceptInfo, RecordID]]:
    normalised = normalise_concept(name, keep_numeric=True)
    if normalised is None:
        raise InvalidArgumentsError(
            f"{name!r} is not a concept name (nothing is left once articles, pronouns and punctuation are removed)",
            {"concept": name},
        )
    rid = concept_id(normalised)
    rows = yield _Query("tool_concept", {"concept": rid})
    if not rows:
        embedding = yield _Embed(name)
        names = [hit.name for hit in _concept_hits((yield _nearest_concepts(embedding, _SUGGESTIONS)))]
        raise NotFoundError(
            f"no concept named {normalised!r}; the closest stored concepts are {names}. "
            "Call search_concepts to find concept names.",
            {"concept": name, "normalised": normalised, "suggestions": names},
        )
    return ConceptInfo(**{**rows[0], "id": _key(rows[0]["id"])}), rid


def _search_chunks(args: SearchChunksArgs) -> Plan:
    result: RetrievalResult = yield _Search(args.query, args.k, args.filters)
    documents = [
        DocumentHit(
            id=doc.id,
            title=doc.title,
            source=doc.source,
            metadata=doc.metadata,
            score=doc.score,
            chunks=[
                Passage(id=c.id, index=c.index, content=c.content, score=c.score, concepts=[m.name for m in c.concepts])
                for c in doc.chunks[: args.chunks_per_document]
            ],
        )
        for doc in result.documents
    ]
    return ChunkSearchResult(query=args.query, mode=result.mode, documents=documents)


def _search_concepts(args: SearchConceptsArgs) -> Plan:
    embedding = yield _Embed(args.query)
    rows = yield _nearest_concepts(embedding, args.k)
    return ConceptSearchResult(query=args.query, concepts=_concept_hits(rows))


def _chunks_for_concept(args: ChunksForConceptArgs) -> Plan:
    concept, rid = yield from _resolve_concept(args.concept)
    rows = yield _Query("tool_concept_chunks", {"concept": rid, "limit": args.limit})
    chunks = [
        ConceptChunk(
            id=_key(row["id"]),
            document_id=_key(row["document"]),
            document_title=row.get("title"),
            index=row["index"],
            content=row["content"],
            mentions=row["mentions"],
        )
        for row in rows
    ]
    return ConceptChunks(concept=concept, chunks=chunks)


def _documents_for_concept(args: DocumentsForConceptArgs) -> Plan:
    concept, rid = yield from _resolve_concept(args.concept)
    rows = yield _Query("tool_concept_documents", {"concept": rid, "limit": args.limit})
    documents = [ConceptDocument(**{**row, "id": _key(row["id"]), "metadata": row.get("metadata") or {}}) for row in rows]
    return ConceptDocuments(concept=concept, documents=documents)


def _related_concepts(args: RelatedConceptsArgs) -> Plan:
    concept, rid = yield from _resolve_concept(args.concept)
    rows = yield _Query("tool_related_concepts", {"concept": rid, "limit": args.limit})
    return RelatedConcepts(concept=concept, related=[RelatedConcept(**{**row, "id": _key(row["id"])}) for row in rows])


def _get_document(args: GetDocumentArgs) -> Plan:
    rows = yield _Query(
        "tool_get_document",
        {"document": document_id(args.document_id), "start": args.first_chunk, "limit": args.max_chunks},
    )
    if not rows:
        raise NotFoundError(
            f"no document with id {args.document_id!r}; use the ids that search_chunks or documents_for_concept return",
            {"document_id": args.document_id},
        )
    row = rows[0]
    chunks = [DocumentChunk(id=_key(c["id"]), index=c["index"], content=c["content"]) for c in row["chunks"]]
    return DocumentView(
        id=_key(row["id"]),
        title=row.get("title"),
        source=row["source"],
        content_type=row["content_type"],
        metadata=row.get("metadata") or {},
        chunk_count=row["chunk_count"],
        chunks=chunks,
    )


# --------------------------------------------------------------------------------------------------
# The catalogue


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[ToolArguments]
    result: type[BaseModel]
    plan: Callable[[Any], Plan]

    def schema(self) -> dict[str, Any]:
        """The tool in OpenAI's function-calling format."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": _parameters(self.arguments)},
        }


TOOLS: tuple[Tool, ...] = (
    Tool(
        "search_chunks",
        "Semantic search over the knowledge base. Returns the documents whose passages best match the query, "
        "best first, each with its matching passages. Start here to answer a question.",
        SearchChunksArgs,
        ChunkSearchResult,
        _search_chunks,
    ),
    Tool(
        "search_concepts",
        "Find concepts (people, places, organisations, topics) by name or meaning. Returns stored concept names "
        "with their similarity and how many documents and chunks mention them; pass a name to the other concept tools.",
        SearchConceptsArgs,
        ConceptSearchResult,
        _search_concepts,
    ),
    Tool(
        "chunks_for_concept",
        "The passages that mention a concept, with their document id and title, most mentions first.",
        ChunksForConceptArgs,
        ConceptChunks,
        _chunks_for_concept,
    ),
    Tool(
        "documents_for_concept",
        "The documents that mention a concept, ranked by how many of their passages mention it.",
        DocumentsForConceptArgs,
        ConceptDocuments,
        _documents_for_concept,
    ),
    Tool(
        "related_concepts",
        "Concepts mentioned in the same passages as a concept, ranked by how many passages they share. Use it to "
        "follow connections (who worked with whom, what happened where).",
        RelatedConceptsArgs,
        RelatedConcepts,
        _related_concepts,
    ),
    Tool(
        "get_document",
        "Read one document: title, source, metadata and its passages in order, a page at a time "
        "(first_chunk, max_chunks; chunk_count is the total).",
        GetDocumentArgs,
        DocumentView,
        _get_document,
    ),
)

_SCHEMA_MAPS = frozenset({"properties", "$defs", "patternProperties"})


def _parameters(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema without pydantic's generated titles ("Query", "K"), which only add
    tokens to the prompt. Keys of ``properties`` are field names and stay, even a field called title."""

    def strip(node: Any) -> Any:
        if isinstance(node, list):
            return [strip(item) for item in node]
        if not isinstance(node, dict):
            return node
        return {
            key: {name: strip(sub) for name, sub in value.items()} if key in _SCHEMA_MAPS else strip(value)
            for key, value in node.items()
            if key != "title"
        }

    return strip(model.model_json_schema())


# --------------------------------------------------------------------------------------------------
# The dispatcher


class ToolDispatcher:
    """Runs the tools over one store.

    ``search_chunks`` uses ``retriever`` when given (any mode: chunk, concept, hybrid, graph...),
    otherwise ``make_retriever(mode, store, embedder=embedder)``. ``tools`` limits the catalogue to
    some names. Nothing touches the database until the first call.
    """

    def __init__(
        self,
        store: SurrealStore,
        *,
        embedder: Embedder | Any = None,
        retriever: BaseRetriever | None = None,
        mode: str = "chunk",
        tools: Iterable[str] | None = None,
    ) -> None:
        self.store = store
        self.retriever = retriever if retriever is not None else make_retriever(mode, store, embedder=embedder)
        self.embedder = self.retriever.embedder if embedder is None else resolve_embedder(embedder)
        catalogue = {tool.name: tool for tool in TOOLS}
        wanted = list(catalogue) if tools is None else list(tools)
        unknown = sorted(set(wanted) - set(catalogue))
        if unknown:
            raise ConfigurationError(f"unknown tools {unknown}: choose from {list(catalogue)}")
        self.tools = {name: catalogue[name] for name in wanted}
        self._retriever_filters = "filters" in inspect.signature(self.retriever.search).parameters

    def __repr__(self) -> str:
        return f"ToolDispatcher({self.store!r}, tools={list(self.tools)})"

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI's function-calling format, for ``tools=`` of a chat completion."""
        return [tool.schema() for tool in self.tools.values()]

    # -- typed calls: return the result model, raise ToolError / KGRagError -----------------------

    def invoke(self, name: str, arguments: str | Mapping[str, Any] | BaseModel | None = None) -> BaseModel:
        """Run a tool and return its typed result; a bad call raises :class:`ToolError` (or another
        :class:`~surreal_kgrag.errors.KGRagError` from the store or the embedder)."""
        tool, args = self._parse(name, arguments)
        plan = tool.plan(args)
        try:
            step = next(plan)
            while True:
                step = plan.send(self._run(step))
        except StopIteration as done:
            return done.value

    async def ainvoke(self, name: str, arguments: str | Mapping[str, Any] | BaseModel | None = None) -> BaseModel:
        tool, args = self._parse(name, arguments)
        plan = tool.plan(args)
        try:
            step = next(plan)
            while True:
                step = plan.send(await self._arun(step))
        except StopIteration as done:
            return done.value

    # -- agent-loop calls: always return JSON -----------------------------------------------------

    def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        """Run a tool call and return its result as JSON, or an error JSON the model can act on."""
        try:
            return self.invoke(name, arguments).model_dump_json()
        except Exception as error:
            return _error_json(name, error)

    async def acall(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        try:
            return (await self.ainvoke(name, arguments)).model_dump_json()
        except Exception as error:
            return _error_json(name, error)

    # -- internals --------------------------------------------------------------------------------

    def _parse(self, name: str, arguments: str | Mapping[str, Any] | BaseModel | None) -> tuple[Tool, ToolArguments]:
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise UnknownToolError(f"there is no tool named {name!r}", {"available": list(self.tools)})
        if isinstance(arguments, tool.arguments):
            return tool, arguments
        if isinstance(arguments, BaseModel):
            arguments = arguments.model_dump()
        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as error:
                raise InvalidArgumentsError(
                    f"the arguments for {name} are not valid JSON ({error.msg} at line {error.lineno} column {error.colno}); "
                    "send a JSON object",
                    {"position": error.pos},
                ) from error
        if not isinstance(arguments, Mapping):
            raise InvalidArgumentsError(
                f"the arguments for {name} must be a JSON object, got {type(arguments).__name__}", {}
            )
        try:
            args = tool.arguments.model_validate(dict(arguments))
        except ValidationError as error:
            problems = [
                {"field": ".".join(str(part) for part in e["loc"]) or "(arguments)", "problem": e["msg"]}
                for e in error.errors(include_url=False)
            ]
            summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
            raise InvalidArgumentsError(f"invalid arguments for {name}: {summary}", {"errors": problems}) from error
        return tool, args

    def _search_options(self, step: _Search) -> dict[str, Any]:
        if not step.filters:
            return {"k": step.k}
        if not self._retriever_filters:
            raise UnsupportedArgumentError(
                f"the {self.retriever.mode} retriever behind search_chunks does not take filters; call it without filters",
                {"argument": "filters"},
            )
        return {"k": step.k, "filters": step.filters}

    def _run(self, step: _Step) -> Any:
        if isinstance(step, _Query):
            return self.store.query(step.name, step.params, **step.integers)[-1]
        if isinstance(step, _Embed):
            return _vector(self.embedder.embed_query(step.text))
        return self.retriever.search(step.query, **self._search_options(step))

    async def _arun(self, step: _Step) -> Any:
        if isinstance(step, _Query):
            return (await self.store.aquery(step.name, step.params, **step.integers))[-1]
        if isinstance(step, _Embed):
            return _vector(await self.embedder.aembed_query(step.text))
        return await self.retriever.asearch(step.query, **self._search_options(step))


def _vector(embedding: Any) -> list[float]:
    return np.asarray(embedding, dtype=np.float32).reshape(-1).tolist()


def _error_json(name: str, error: Exception) -> str:
    """The one place where every failure of a call becomes an answer for the model. Errors the
    package raises on purpose carry their type; anything else is a bug, logged with its traceback
    and reported as ``internal_error`` so the agent loop can go on."""
    if isinstance(error, KGRagError):
        payload = error_payload(error)
    else:
        logger.exception("tool %r failed unexpectedly", name)
        payload = {"error": {"type": "internal_error", "message": f"{type(error).__name__}: {error}", "details": {}}}
    return json.dumps(payload, ensure_ascii=False)
