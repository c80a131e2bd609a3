"""Typed records that move through the pipeline: loaded documents, chunks, concepts, summaries."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: Metadata keys left out of a document's content hash: a file touched but unchanged is not ingested
#: again (its stored ``modified`` is the time of the version that was ingested).
UNHASHED_METADATA = frozenset({"modified"})


class TextLayout(BaseModel):
    """Where the pages, sections and tables of a document's text lie, as character offsets into it.

    A loader that knows its file's structure (PDF, Markdown, HTML) fills it in; the chunker reads it
    so each chunk records its pages and section, and a table is chunked by rows under its header.
    """

    model_config = ConfigDict(frozen=True)

    pages: list[int] = Field(default_factory=list, description="offset at which page i + 1 starts (pages[0] == 0)")
    sections: list[tuple[int, tuple[str, ...]]] = Field(
        default_factory=list, description="offset at which a section starts, and its path of headings, in text order"
    )
    tables: list[tuple[int, int, int]] = Field(
        default_factory=list, description="start, body start, end of each table: text[start:body] is its header, one row a line"
    )


class SourceDocument(BaseModel):
    """One document as a loader produced it, before chunking.

    ``key`` is the stable identity of the document: re-ingesting the same key replaces the stored
    document, so it must not depend on anything that changes between runs (use the corpus id, the
    file path, or the framework document's id).
    """

    model_config = ConfigDict(frozen=True)

    key: str = Field(min_length=1)
    text: str
    title: str | None = None
    source: str
    content_type: str = "text/plain"
    metadata: dict[str, Any] = Field(default_factory=dict)
    access: list[str] = Field(default_factory=list)
    layout: TextLayout | None = Field(None, description="pages, sections and tables of ``text``, when the loader knows them")
    parts: int | None = Field(
        None,
        ge=1,
        description="for one part of a file read in parts (key ``<source>#part-00001``, ...): how many parts the file "
        "has now; the ingest deletes the file's stored parts past it. Neither stored nor hashed, so a file grown at "
        "its end re-ingests only its last part and the new ones",
    )

    @property
    def content_hash(self) -> str:
        """Hash of everything that ends up stored (but ``UNHASHED_METADATA``), so a change to any of it
        triggers a re-ingest (the source too: a record that moves to another file is written again)."""
        digest = hashlib.sha256()
        for part in (self.text, self.title or "", self.source, self.content_type, repr(sorted(self.access))):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")
        hashed = {k: v for k, v in self.metadata.items() if k not in UNHASHED_METADATA}
        digest.update(_stable_repr(hashed).encode("utf-8", "surrogatepass"))
        if self.layout is not None:  # chunks record pages and sections: a new layout rewrites them
            digest.update(self.layout.model_dump_json().encode("utf-8", "surrogatepass"))
        return digest.hexdigest()


class LoadFailure(BaseModel):
    """An input that could not be loaded; it is reported and skipped, the batch goes on."""

    model_config = ConfigDict(frozen=True)

    source: str
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.reason}"


class TextChunk(BaseModel):
    """A contiguous piece of a document: ``text[start:end] == content``."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0)
    content: str
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    page_start: int | None = Field(None, description="first page (1-based) the chunk's text is on, for paged documents")
    page_end: int | None = Field(None, description="last page the chunk's text is on")
    section: tuple[str, ...] = Field((), description="the headings the chunk lies under, outermost first")
    header: str = Field("", description="a table's header lines, repeated on a chunk that continues the table")

    @property
    def text(self) -> str:
        """What the chunk stores and shows: the repeated table header, if any, then ``content``."""
        return f"{self.header}\n{self.content}" if self.header else self.content


class ConceptMention(BaseModel):
    """A concept found in one chunk.

    ``name`` is the normalised form and the concept's identity in the store; ``display`` is how it
    was first written; ``count`` is how often the chunk mentions it.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    display: str
    kind: str
    count: int = Field(default=1, ge=1)


class Relation(BaseModel):
    """A typed relation between two concepts of one chunk (names as ``normalise_concept`` gives
    them), stored as a ``concept -> RELATES_TO -> concept`` edge with the chunk it was read from."""

    model_config = ConfigDict(frozen=True)

    subject: str
    type: str
    object: str
    in_ontology: bool = True
    violation: str | None = Field(None, description="why it breaks the ontology (kept under on_violation='flag')")


class ChunkGraph(BaseModel):
    """What a relation-extracting concept extractor found in one chunk."""

    mentions: list[ConceptMention]
    relations: list[Relation] = Field(default_factory=list)


class LLMIngestStats(BaseModel):
    """The LLM extractor's share of an ingest run: what it cost and what it gave."""

    chunks: int = Field(0, description="chunks extracted")
    cache_hits: int = Field(0, description="chunks the extraction cache answered, without a request")
    fallbacks: int = Field(0, description="chunks extracted by the fallback extractor because the model's reply failed")
    requests: int = Field(0, description="chat requests sent, retries included")
    retries: int = 0
    prompt_tokens: int = Field(0, description="as the endpoint reported them")
    completion_tokens: int = 0
    relations: int = Field(0, description="RELATES_TO edges written")

    def add(self, other: LLMIngestStats) -> None:
        for name in type(self).model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class IngestSummary(BaseModel):
    """What one ingest run did."""

    added: int = 0
    updated: int = 0
    skipped: int = 0
    failed: int = 0
    deleted: int = 0
    chunks: int = 0
    replaced_chunks: int = Field(default=0, description="stored chunks of the updated documents, which their new versions replaced")
    concepts: int = Field(default=0, description="concepts created by this run")
    concept_vectors: int = Field(default=0, description="concepts given a vector by this run (IngestConfig.concept_vector_min_chunks)")
    edges: int = 0
    seconds: float = 0.0
    failures: list[LoadFailure] = Field(default_factory=list)
    timings: dict[str, float] = Field(
        default_factory=dict,
        description=(
            "busy seconds per stage: load, chunk, extract, embed (chunks), write, vectors (embedding the concepts "
            "queued for a vector, as the writes commit), index. Load to vectors run at the same time, so they add up to "
            "more than `seconds`"
        ),
    )
    llm: LLMIngestStats | None = Field(
        None, description="tokens, requests and cache hits of an LLM extractor, and the relations written; None without one"
    )


class StoreStats(BaseModel):
    """Counts and index state of a store (``surreal-kgrag stats``)."""

    documents: int
    chunks: int
    searchable_chunks: int = Field(description="chunks in the full-text (BM25) index; equals chunks")
    concepts: int
    mentions: int
    shared_concepts: int = Field(description="concepts mentioned by more than one document")
    embedding_dimension: int | None
    embedder: str | None
    server_version: str
    indexes: dict[str, dict[str, Any]] = Field(
        description="per search index (chunk, concept, text): live name, generation, rows indexed, updates pending, build status"
    )


def _stable_repr(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{_stable_repr(value[k])}" for k in sorted(value, key=str)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_stable_repr(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):  # a set of strings iterates in another order in every process
        return "{" + ",".join(sorted(_stable_repr(v) for v in value)) + "}"
    return repr(value)
