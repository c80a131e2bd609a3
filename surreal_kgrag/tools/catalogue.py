"""The agent tools: small typed operations over the knowledge graph that an LLM composes.

Each tool is an argument model, a result model (:mod:`.models`) and a plan -- a generator that
yields the queries and model calls it needs (:mod:`surreal_kgrag.retrieval.plan`, the same mechanism
the retrievers use) and returns its result, so one body serves the sync and the async dispatcher,
and ``search_chunks`` simply runs the retriever's own plan. The queries are ``surql/tool_*.surql``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel

from ..db.sdk import RecordID
from ..embed import Embedder
from ..embed.base import in_this_process
from ..extract import normalise_concept
from ..ids import concept_id, document_id
from ..llm.readonly import ReadonlyLimits, ReadonlyQueryResult, readonly_plan
from ..llm.text2surql import readonly_tool_description
from ..retrieval import BaseRetriever, Scope
from ..retrieval.plan import Plan, Query
from ..retrieval.pool import grow
from ..retrieval.request import embedding_call
from ..retrieval.results import placement
from .errors import InvalidArgumentsError, NotFoundError
from .models import (
    MAX_K,
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

_EF = 80  # HNSW search breadth for concept search; at least k
_SUGGESTIONS = 5  # nearest concepts offered when a concept name is not found
# A scoped concept search widens its pool only while it has read fewer edges than this many times
# max_edges, and to no more concepts than the rest of that budget pays for: each hit costs up to
# max_edges edges, and a scope that hides most hits would otherwise grow the pool to MAX_CANDIDATES
# of them (a last round of thousands of concepts, each read up to max_edges).
_SEARCH_EDGE_BUDGET = MAX_K


class ToolContext(Protocol):
    """What a tool's plan works with: the dispatcher's retriever, embedder and scope, the number of
    a concept's edges a tool reads, and the limits of ``run_surql``."""

    retriever: BaseRetriever
    embedder: Embedder
    scope: Scope
    max_edges: int
    surql_limits: ReadonlyLimits


def _query(context: ToolContext, name: str, params: dict[str, Any], **integers: int) -> Query:
    """``surql/<name>.surql`` within the caller's scope (its ``{{scope}}`` placeholder), reading at
    most ``max_edges`` edges of a concept."""
    scope = context.scope.compile()
    bound = {"scoped": bool(scope.condition), "max_edges": context.max_edges, **scope.params}
    return Query(name, {**params, **bound}, {**integers, "scope": scope})


def _key(value: Any) -> str:
    return str(value.id) if isinstance(value, RecordID) else str(value)


def _embed(context: ToolContext, text: str) -> Plan[list[float]]:
    vector = yield embedding_call(in_this_process(context.embedder), text)  # nothing runs beside it: no hand-off to a child
    return np.asarray(vector, dtype=np.float32).reshape(-1).tolist()


def _nearest_concepts(
    context: ToolContext, embedding: list[float], k: int, named: RecordID | None = None
) -> Plan[tuple[list[ConceptHit], bool]]:
    """The ``k`` nearest concepts a chunk in the scope mentions, after the concept ``named`` (the
    one the query names exactly, if stored), and whether the edge budget stopped the search: the
    KNN pool grows while concepts outside the scope leave fewer than ``k``."""
    candidates: int | None = k if context.scope.unrestricted else 4 * k
    rows: list[dict[str, Any]] = []
    budget = _SEARCH_EDGE_BUDGET * context.max_edges
    edges_read = 0
    while candidates is not None:
        params = {"embedding": embedding, "limit": k, "named": [named] if named is not None else []}
        out = (yield _query(context, "tool_search_concepts", params, candidates=candidates, ef=max(_EF, candidates)))[-1]
        rows = out["concepts"]
        edges_read += out["edges_read"]
        wider = grow(candidates, len(rows), k, out["fetched"])
        affordable = (budget - edges_read) // context.max_edges  # concepts whose edges the rest of the budget pays for
        if wider is not None and affordable <= candidates:
            return _concept_hits(rows), True
        candidates = None if wider is None else min(wider, affordable)
    return _concept_hits(rows), False


def _concept_hits(rows: list[dict[str, Any]]) -> list[ConceptHit]:
    return [ConceptHit(**{**row, "id": _key(row["id"])}) for row in rows]


def _resolve_concept(context: ToolContext, name: str) -> Plan[tuple[ConceptInfo, RecordID]]:
    normalised = normalise_concept(name, keep_numeric=True)
    if normalised is None:
        raise InvalidArgumentsError(
            f"{name!r} is not a concept name (nothing is left once articles, pronouns and punctuation are removed)",
            {"concept": name},
        )
    rid = concept_id(normalised)
    rows = (yield _query(context, "tool_concept", {"concept": rid}))[-1]
    if not rows:  # absent, or only mentioned outside the scope: the same answer
        embedding = yield from _embed(context, name)
        hits, _ = yield from _nearest_concepts(context, embedding, _SUGGESTIONS)
        names = [hit.name for hit in hits]
        raise NotFoundError(
            f"no concept named {normalised!r}; the closest stored concepts are {names}. Call search_concepts to find concept names.",
            {"concept": name, "normalised": normalised, "suggestions": names},
        )
    return ConceptInfo(**{**rows[0], "id": _key(rows[0]["id"])}), rid


def _search_chunks(context: ToolContext, args: SearchChunksArgs) -> Plan[BaseModel]:
    result = yield from context.retriever.plan(args.query, k=args.k, filters=args.filters or None, scope=context.scope)
    documents = [
        DocumentHit(
            id=doc.id,
            title=doc.title,
            source=doc.source,
            metadata=doc.metadata,
            score=doc.score,
            chunks=[
                Passage(
                    id=c.id,
                    index=c.index,
                    content=c.content,
                    score=c.score,
                    concepts=[m.name for m in c.concepts],
                    page_start=c.page_start,
                    page_end=c.page_end,
                    section=c.section,
                )
                for c in doc.chunks[: args.chunks_per_document]
            ],
        )
        for doc in result.documents
    ]
    return ChunkSearchResult(query=args.query, mode=result.mode, documents=documents)


def _search_concepts(context: ToolContext, args: SearchConceptsArgs) -> Plan[BaseModel]:
    embedding = yield from _embed(context, args.query)
    normalised = normalise_concept(args.query, keep_numeric=True)
    named = concept_id(normalised) if normalised is not None else None
    concepts, truncated = yield from _nearest_concepts(context, embedding, args.k, named)
    return ConceptSearchResult(query=args.query, concepts=concepts, truncated=truncated)


def _chunks_for_concept(context: ToolContext, args: ChunksForConceptArgs) -> Plan[BaseModel]:
    concept, rid = yield from _resolve_concept(context, args.concept)
    rows = (yield _query(context, "tool_concept_chunks", {"concept": rid, "limit": args.limit}))[-1]
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


def _documents_for_concept(context: ToolContext, args: DocumentsForConceptArgs) -> Plan[BaseModel]:
    concept, rid = yield from _resolve_concept(context, args.concept)
    rows = (yield _query(context, "tool_concept_documents", {"concept": rid, "limit": args.limit}))[-1]
    documents = [ConceptDocument(**{**row, "id": _key(row["id"]), "metadata": row.get("metadata") or {}}) for row in rows]
    return ConceptDocuments(concept=concept, documents=documents)


def _related_concepts(context: ToolContext, args: RelatedConceptsArgs) -> Plan[BaseModel]:
    concept, rid = yield from _resolve_concept(context, args.concept)
    rows = (yield _query(context, "tool_related_concepts", {"concept": rid, "limit": args.limit}))[-1]
    return RelatedConcepts(concept=concept, related=[RelatedConcept(**{**row, "id": _key(row["id"])}) for row in rows])


def _concept_relations(context: ToolContext, args: ConceptRelationsArgs) -> Plan[BaseModel]:
    concept, rid = yield from _resolve_concept(context, args.concept)
    out = (yield _query(context, "tool_concept_relations", {"concept": rid, "limit": args.limit}))[-1]
    relations = [
        ConceptRelation(
            type=row["type"],
            subject=row["subject"],
            object=row["object"],
            in_ontology=row["in_ontology"],
            chunk_id=_key(row["chunk"]),
            document_id=_key(row["document"]),
            document_title=row.get("title"),
            evidence=row.get("evidence") or "",
        )
        for row in out["relations"]
    ]
    return ConceptRelations(concept=concept, relations=relations, truncated=out["truncated"])


def _run_surql(context: ToolContext, args: ReadonlyQueryArgs) -> Plan[BaseModel]:
    """The statement the calling model wrote, through the read-only guard, within the caller's
    scope (refused when the database would not enforce it: :func:`~surreal_kgrag.llm.readonly.scope_plan`)
    and the dispatcher's limits narrowed by ``max_rows``."""
    limits = context.surql_limits.model_copy(update={"rows": min(context.surql_limits.rows, args.max_rows)})
    return (yield from readonly_plan(context.retriever.store, args.query, limits=limits, scope=context.scope))


def _get_document(context: ToolContext, args: GetDocumentArgs) -> Plan[BaseModel]:
    rows = (
        yield _query(
            context,
            "tool_get_document",
            {"document": document_id(args.document_id), "start": args.first_chunk, "limit": args.max_chunks},
        )
    )[-1]
    if not rows:
        raise NotFoundError(
            f"no document with id {args.document_id!r}; use the ids that search_chunks or documents_for_concept return",
            {"document_id": args.document_id},
        )
    row = rows[0]
    chunks = [DocumentChunk(id=_key(c["id"]), index=c["index"], content=c["content"], **placement(c)) for c in row["chunks"]]
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
    plan: Callable[[ToolContext, Any], Plan[BaseModel]]

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
        "concept_relations",
        "Typed relations of a concept (born_in, capital_of, discovered...), outgoing and incoming, each with the "
        "passage it was read from. Only knowledge bases ingested with an LLM extractor have them; otherwise the "
        "list is empty and related_concepts is the way to follow connections.",
        ConceptRelationsArgs,
        ConceptRelations,
        _concept_relations,
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

#: Offered only when asked for (``ToolDispatcher(allow_surql=True)``, ``surreal-kgrag-mcp --allow-surql``):
#: it runs SurrealQL the calling model writes, read-only, within limits and the caller's scope.
RUN_SURQL = Tool("run_surql", readonly_tool_description(), ReadonlyQueryArgs, ReadonlyQueryResult, _run_surql)

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
