"""What a retriever returns: documents with the chunks, concepts and paths that led to them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from ..wire import without_nulls

Channel = Literal["vector", "text", "concept", "graph", "document"]
#: A document's metadata as stored: a stored null reads as None.
Metadata = Annotated[dict[str, Any], BeforeValidator(lambda value: without_nulls(value or {}))]


class ConceptMatch(BaseModel):
    """A concept that led to a result, with its score (similarity to the query, or its weight when
    the query named it)."""

    id: str
    name: str
    score: float


class ChunkHit(BaseModel):
    id: str
    index: int
    content: str
    score: float
    page_start: int | None = Field(None, description="first page (1-based) of a paged document (PDF) the chunk is on")
    page_end: int | None = Field(None, description="last page the chunk is on")
    section: list[str] = Field(default_factory=list, description="the headings the chunk lies under, outermost first")
    concepts: list[ConceptMatch] = Field(default_factory=list, description="concepts that led to this chunk")


class ProvenancePath(BaseModel):
    """One reason a document came back: query -> [concept ->] chunk -> document."""

    channel: Channel
    score: float = Field(description="the channel's score for this path")
    document_id: str
    chunk_id: str
    concept: ConceptMatch | None = None
    via_chunk_id: str | None = Field(None, description="graph paths: the seed chunk the walk started from")

    def describe(self) -> str:
        hop = f"chunk {self.via_chunk_id} -> " if self.via_chunk_id else ""
        concept = f"concept {self.concept.name!r} ({self.concept.score:.3f}) -> " if self.concept else ""
        return f"query -[{self.channel} {self.score:.3f}]-> {hop}{concept}chunk {self.chunk_id} -> document {self.document_id}"


class RetrievedDocument(BaseModel):
    id: str = Field(description="the document key (corpus id or file path)")
    title: str | None
    source: str
    metadata: Metadata
    score: float
    chunks: list[ChunkHit]
    chunk_count: int | None = Field(None, description="chunks the document has (indexes 0 .. chunk_count - 1), when the query read it")
    provenance: list[ProvenancePath] = Field(default_factory=list)

    @property
    def concepts(self) -> list[ConceptMatch]:
        seen: dict[str, ConceptMatch] = {}
        for chunk in self.chunks:
            for concept in chunk.concepts:
                if concept.id not in seen or concept.score > seen[concept.id].score:
                    seen[concept.id] = concept
        return sorted(seen.values(), key=lambda c: -c.score)


class RetrievalResult(BaseModel):
    query: str
    mode: str
    documents: list[RetrievedDocument]
    embed_ms: float = Field(0.0, description="time spent embedding the query (0 when cached)")
    analyze_ms: float = Field(0.0, description="time spent finding the concepts the query names (0 when cached)")
    search_ms: float = Field(0.0, description="time spent in the database")
    rerank_ms: float = 0.0


def placement(row: Mapping[str, Any]) -> dict[str, Any]:
    """A chunk row's pages and section, for :class:`ChunkHit` (absent on chunks without a layout)."""
    return {"page_start": row.get("page_start"), "page_end": row.get("page_end"), "section": list(row.get("section") or [])}


def where(chunk: ChunkHit) -> str:
    """ "p. 4", "pp. 4-5", the section path after it ("p. 4, Item 1 > Notes"), or "" when unknown."""
    parts = []
    if chunk.page_start is not None:
        end = chunk.page_end or chunk.page_start
        parts.append(f"p. {chunk.page_start}" if end == chunk.page_start else f"pp. {chunk.page_start}-{end}")
    if chunk.section:
        parts.append(" > ".join(chunk.section))
    return ", ".join(parts)
