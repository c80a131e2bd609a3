"""The records one document becomes: its ``document`` row, chunks, full-text rows, concept edges and
the typed relations read from its chunks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import identity, wire
from ..db.sdk import RecordID
from ..extract import ALIAS_KIND, NOUN_PHRASE, TITLE_KIND
from ..ids import chunk_record_id, concept_id, document_id
from ..models import ConceptMention, Relation, SourceDocument, TextChunk
from .relations import relation_edges

#: Concept kinds that name the document itself: their edges from its chunks are ``own`` edges.
OWN_KINDS = frozenset({TITLE_KIND, ALIAS_KIND})


@dataclass
class DocumentWork:
    """A document on its way through the pipeline: its chunks, then what the models found."""

    doc: SourceDocument
    chunks: list[TextChunk]
    exists: bool  # a stored version is being replaced (counts as "updated")
    mentions: list[list[ConceptMention]] = field(default_factory=list)  # per chunk
    relations: list[list[Relation]] = field(default_factory=list)  # per chunk; empty without a graph extractor
    vectors: list[np.ndarray] = field(default_factory=list)  # per chunk
    contexts: list[str] = field(default_factory=list)  # per chunk: the text embedded and full-text indexed
    replaced_chunks: int = 0  # the stored version's chunks, which writing this one removes


@dataclass
class PreparedDocument:
    """A document ready to write, and the concepts its chunks mention."""

    doc: SourceDocument
    exists: bool
    record: dict[str, Any]
    chunks: list[dict[str, Any]]
    texts: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    concepts: dict[str, ConceptMention]
    relations: list[dict[str, Any]] = field(default_factory=list)  # RELATES_TO edges
    names: list[dict[str, Any]] = field(default_factory=list)  # document_name rows
    replaced_chunks: int = 0

    @property
    def size(self) -> int:
        """The chunks its write inserts or, replacing a longer stored version, removes: a short
        document replacing a long one is written in slices too, so no transaction grows with it."""
        return max(len(self.chunks), self.replaced_chunks)

    @property
    def own_names(self) -> set[str]:
        """Names of this document's title and aliases."""
        return {name for name, m in self.concepts.items() if m.kind in OWN_KINDS}


def in_context(doc: SourceDocument, text: str, title_in_context: bool) -> str:
    """The text a chunk is embedded and full-text indexed as: under its document's title."""
    if title_in_context and doc.title and doc.title.strip():
        return f"{doc.title.strip()}\n{text}"
    return text


def prepare(work: DocumentWork, doc_concepts: list[ConceptMention], *, keep_text: bool = False) -> PreparedDocument:
    """Records of one document whose chunks went through the models; ``doc_concepts`` (its metadata
    concepts) are linked to every chunk; ``keep_text`` stores the exact text on the document too."""
    doc = work.doc
    doc_id = document_id(doc.key)
    content_hash = doc.content_hash  # hashes the whole document: once, not once a chunk
    access = list(doc.access)
    names = identity.document_names(doc, doc_concepts, work.mentions, [chunk.page_start for chunk in work.chunks])
    prepared = PreparedDocument(
        doc=doc,
        exists=work.exists,
        record={
            "id": doc_id,
            "source": doc.source,
            "title": doc.title,
            "content_type": doc.content_type,
            "content_hash": content_hash,
            "metadata": wire.with_nulls(doc.metadata),
            "access": access,
            "chunk_count": len(work.chunks),
            "text": doc.text if keep_text else None,
            "names": names,
            "date": identity.document_date(doc),
        },
        chunks=[],
        texts=[],
        edges=[],
        concepts={},
        names=[{"id": RecordID("document_name", [name, doc_id]), "doc": doc_id, "access": access} for name in names],
        replaced_chunks=work.replaced_chunks,
    )
    relations = work.relations or [[] for _ in work.chunks]
    for chunk, mentions, vector, context, found in zip(
        work.chunks, work.mentions, work.vectors, work.contexts, relations, strict=True
    ):
        chunk_id = chunk_record_id(doc.key, content_hash, chunk.index)
        prepared.chunks.append(
            {
                "id": chunk_id,
                "doc": doc_id,
                "index": chunk.index,
                "content": chunk.text,
                "char_start": chunk.start,
                "char_end": chunk.end,
                "page_start": chunk.page_start,
                "page_end": chunk.page_end,
                "section": list(chunk.section) if chunk.section else None,
                "access": access,
                "embedding": vector,
            }
        )
        prepared.texts.append(
            {
                "id": RecordID("chunk_text", chunk_id.id),  # type: ignore[arg-type]  # a str: chunk_record_id
                "chunk": chunk_id,
                "doc": doc_id,
                "access": access,
                "text": context,
            }
        )
        merged = _merge(mentions, doc_concepts)
        own = {m.name for m in doc_concepts if m.kind in OWN_KINDS}
        for mention in merged:
            if mention.name in own:  # a title spaCy also found in the chunk is still the document's own
                prepared.concepts[mention.name] = next(m for m in doc_concepts if m.name == mention.name)
            else:
                prepared.concepts.setdefault(mention.name, mention)
            edge = {"in": chunk_id, "out": concept_id(mention.name), "doc": doc_id, "count": mention.count}
            prepared.edges.append({**edge, "own": mention.name in own, "np": mention.kind == NOUN_PHRASE})
        if found:
            prepared.relations += relation_edges(chunk_id, doc_id, found, {m.name for m in merged}, access)
    return prepared


def groups(items: list[PreparedDocument], max_docs: int, max_chunks: int) -> Iterator[list[PreparedDocument]]:
    """Consecutive groups of at most ``max_docs`` documents and ``max_chunks`` chunks (a longer
    document makes a group of its own)."""
    group: list[PreparedDocument] = []
    chunks = 0
    for item in items:
        if group and (len(group) >= max_docs or chunks + item.size > max_chunks):
            yield group
            group, chunks = [], 0
        group.append(item)
        chunks += item.size
    if group:
        yield group


def _merge(chunk_mentions: list[ConceptMention], doc_mentions: list[ConceptMention]) -> list[ConceptMention]:
    """Chunk concepts plus the document's metadata concepts, one entry per name."""
    merged = {m.name: m for m in chunk_mentions}
    for m in doc_mentions:
        merged.setdefault(m.name, m)
    return list(merged.values())
