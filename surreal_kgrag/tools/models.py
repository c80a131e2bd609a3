"""What the agent tools take (strict argument models, whose JSON schemas the model sees) and what
they answer (result models the model reads)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..retrieval.results import Metadata

MAX_K = 50
#: How many of a concept's edges a concept tool reads (ToolDispatcher(max_edges=...)): its cost is
#: bounded by this, not by how many chunks mention the concept. Lists about a concept mentioned more
#: often are drawn from the first this many (the store's order; edge ids are random) and say so.
DEFAULT_MAX_EDGES = 1000

# Arguments (what the model sends). Strict: "3" is not an integer, unknown fields are rejected,
# surrounding whitespace is dropped (so "  " is an empty query).


class ToolArguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, str_strip_whitespace=True)


class SearchChunksArgs(ToolArguments):
    query: str = Field(min_length=1, max_length=2000, description="what to look for, in natural language")
    k: int = Field(5, ge=1, le=MAX_K, description="how many documents to return, best first")
    chunks_per_document: int = Field(
        2, ge=1, le=10, description="how many matching passages to show per document, at most what the search kept (3 in the fused modes)"
    )
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
        description="a concept name as search_concepts returns it (e.g. 'marie curie'); case, articles and punctuation are normalised",
    )


class ChunksForConceptArgs(_ConceptArgs):
    limit: int = Field(10, ge=1, le=MAX_K, description="at most this many chunks")


class DocumentsForConceptArgs(_ConceptArgs):
    limit: int = Field(10, ge=1, le=MAX_K, description="at most this many documents")


class RelatedConceptsArgs(_ConceptArgs):
    limit: int = Field(10, ge=1, le=MAX_K, description="at most this many related concepts")


class ConceptRelationsArgs(_ConceptArgs):
    limit: int = Field(20, ge=1, le=MAX_K, description="at most this many relations")


class ReadonlyQueryArgs(ToolArguments):
    query: str = Field(min_length=1, max_length=4000, description="one SurrealQL SELECT statement (read-only)")
    max_rows: int = Field(50, ge=1, le=500, description="rows returned at most")


class GetDocumentArgs(ToolArguments):
    # Document ids are keys: " a" and "a" are different documents.
    model_config = ConfigDict(str_strip_whitespace=False)

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
    truncated: bool = Field(
        False,
        description="more chunks mention it than a tool reads (max_edges): lists about it come from the first max_edges "
        "mentions, and inside a scope documents and chunks count only those. Inside a scope it says that the scope's own "
        "mentions filled max_edges; how many lie outside the scope is not told",
    )


class ConceptHit(ConceptInfo):
    score: float = Field(description="cosine similarity to the query")


class ConceptSearchResult(BaseModel):
    query: str
    concepts: list[ConceptHit]
    truncated: bool = Field(
        False, description="the search stopped widening at its edge budget, before finding k concepts the caller may read"
    )


class Passage(BaseModel):
    id: str
    index: int = Field(description="position of the chunk in its document")
    content: str
    score: float
    concepts: list[str] = Field(default_factory=list, description="concepts that led to this passage, if any")
    page_start: int | None = Field(None, description="first page (1-based) of a paged document (PDF) the chunk is on")
    page_end: int | None = Field(None, description="last page the chunk is on")
    section: list[str] = Field(default_factory=list, description="headings the chunk lies under, outermost first")


class DocumentHit(BaseModel):
    id: str
    title: str | None
    source: str
    metadata: Metadata
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
    metadata: Metadata
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
    truncated: bool = Field(
        False,
        description="more chunks mention it than a tool reads (max_edges); inside a scope, documents counts those read, "
        "and it says that the scope's own mentions filled max_edges",
    )


class RelatedConcepts(BaseModel):
    concept: ConceptInfo
    related: list[RelatedConcept]


class ConceptRelation(BaseModel):
    type: str = Field(description="the relation, e.g. born_in")
    subject: str = Field(description="the subject concept's name")
    object: str = Field(description="the object concept's name")
    in_ontology: bool = Field(description="false: kept although the extraction ontology does not allow it")
    chunk_id: str = Field(description="the passage the relation was read from")
    document_id: str
    document_title: str | None
    evidence: str = Field(description="the text of that passage")


class ConceptRelations(BaseModel):
    concept: ConceptInfo
    relations: list[ConceptRelation] = Field(description="outgoing and incoming, by type; empty when none were extracted")
    truncated: bool = Field(
        False,
        description="the concept has more relations one way than a tool reads (max_edges): these come from the first ones "
        "(inside a scope: the scope's own relations filled max_edges one way)",
    )


class DocumentChunk(BaseModel):
    id: str
    index: int
    content: str
    page_start: int | None = Field(None, description="first page (1-based) of a paged document (PDF) the chunk is on")
    page_end: int | None = Field(None, description="last page the chunk is on")
    section: list[str] = Field(default_factory=list, description="headings the chunk lies under, outermost first")


class DocumentView(BaseModel):
    id: str
    title: str | None
    source: str
    content_type: str
    metadata: Metadata
    chunk_count: int
    chunks: list[DocumentChunk] = Field(description="the requested page of chunks, in order")
