"""Typed relations at ingest: a concept extractor that also reads relations between the concepts of
a chunk (``surreal_kgrag.llm.LLMExtractor``) has them written as ``concept -> RELATES_TO ->
concept`` edges in the same transaction as their document, chunk and concepts
(``write_documents.surql``), so there is never a document without its relations or a relation
without its document. The edge keeps its chunk: deleting or replacing the chunk deletes the edge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..db.sdk import RecordID
from ..ids import concept_id
from ..models import ChunkGraph, LLMIngestStats, Relation

TABLE = "RELATES_TO"


class ExtractedGraph(Protocol):
    @property
    def chunks(self) -> Sequence[ChunkGraph]: ...

    def ingest_stats(self) -> LLMIngestStats: ...


@runtime_checkable
class GraphExtractor(Protocol):
    """A concept extractor that also returns relations (and reports its cost): the ingest calls
    ``extract_graph`` instead of ``extract`` and writes the relations."""

    def extract_graph(self, texts: Sequence[str]) -> ExtractedGraph: ...


def extract_graphs(extractor: Any, stats: LLMIngestStats | None, texts: list[str]) -> Sequence[ChunkGraph]:
    """Concepts of each text, and relations when ``extractor`` reads them (its cost is added to
    ``stats``); any other concept extractor gives concepts only."""
    if not isinstance(extractor, GraphExtractor):
        return [ChunkGraph.model_construct(mentions=mentions, relations=[]) for mentions in extractor.extract(texts)]
    found = extractor.extract_graph(texts)
    if stats is not None:
        stats.add(found.ingest_stats())
    return found.chunks


def relation_edges(
    chunk: RecordID, document: RecordID, relations: Iterable[Relation], mentioned: set[str], access: list[str]
) -> list[dict[str, Any]]:
    """The ``RELATES_TO`` records of the relations read from one chunk. Only relations between
    concepts the chunk mentions are kept (so both ends exist once the chunk is written); ids are
    the chunk's key and a hash of the triple, so the same relation is one edge per chunk."""
    edges: dict[str, dict[str, Any]] = {}
    for relation in relations:
        if relation.subject not in mentioned or relation.object not in mentioned or relation.subject == relation.object:
            continue
        triple = f"{relation.subject}\x00{relation.type}\x00{relation.object}"
        digest = hashlib.sha256(triple.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        key = f"{chunk.id!s}::{digest}"
        edges.setdefault(
            key,
            {
                "id": RecordID(TABLE, key),
                "in": concept_id(relation.subject),
                "out": concept_id(relation.object),
                "type": relation.type,
                "chunk": chunk,
                "doc": document,
                "access": access,
                "in_ontology": relation.in_ontology,
            },
        )
    return list(edges.values())
