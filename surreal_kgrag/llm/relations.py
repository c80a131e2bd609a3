"""Extracted relations in the store: ``concept -> RELATES_TO -> concept`` edges with a ``type``, the
chunk and document they were read from, and the document's access labels (``surql/schema_relations.surql``).

The ingest writes a group of documents first (their concepts with them), then calls
:func:`write_relations` with the edges :func:`relation_edges` built for their chunks. The edges of a
chunk go when the chunk goes (re-ingest, delete): the schema cascades the delete.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from surrealdb import RecordID

from ..ids import concept_id, document_id
from ..retrieval.scope import Scope
from ..store import SurrealStore
from .extraction import Relation
from .extractor import LLMExtractor
from .plan import Call, Plan, adrive, drive

TABLE = "RELATES_TO"

_ready: weakref.WeakSet[SurrealStore] = weakref.WeakSet()


def ensure_relation_schema(store: SurrealStore) -> None:
    """Define the ``RELATES_TO`` table on ``store`` (idempotent; done once per store object)."""
    if store not in _ready:
        store.query("schema_relations")
        _ready.add(store)


async def aensure_relation_schema(store: SurrealStore) -> None:
    if store not in _ready:
        await store.aquery("schema_relations")
        _ready.add(store)


def relation_edges(chunk: RecordID, document: RecordID, relations: Iterable[Relation], access: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The ``RELATES_TO`` records of the relations extracted from one chunk. Their subjects and
    objects must be concepts the chunk mentions (``LLMExtractor`` only returns such relations), so
    they exist once the chunk's document is written."""
    edges = []
    for relation in relations:
        digest = hashlib.sha256(f"{relation.subject}\x00{relation.type}\x00{relation.object}".encode()).hexdigest()[:16]
        edges.append(
            {
                "id": RecordID(TABLE, f"{chunk.id!s}::{digest}"),
                "in": concept_id(relation.subject),
                "out": concept_id(relation.object),
                "type": relation.type,
                "chunk": chunk,
                "doc": document,
                "access": list(access),
                "in_ontology": relation.in_ontology,
            }
        )
    return edges


def write_relations(store: SurrealStore, documents: Sequence[RecordID], edges: Sequence[dict[str, Any]]) -> int:
    """Replace the relations of ``documents`` with ``edges`` in one transaction; returns how many
    edges were written. Defines the table first if this store object has not yet."""
    ensure_relation_schema(store)
    store.query("write_relations", _params(documents, edges))
    return len(edges)


async def awrite_relations(store: SurrealStore, documents: Sequence[RecordID], edges: Sequence[dict[str, Any]]) -> int:
    await aensure_relation_schema(store)
    await store.aquery("write_relations", _params(documents, edges))
    return len(edges)


def _params(documents: Sequence[RecordID], edges: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"doc_ids": list(documents), "edges": list(edges), "edge_ids": [edge["id"] for edge in edges]}


def relations_plan(store: SurrealStore, extractor: LLMExtractor, keys: Sequence[str]) -> Plan[int]:
    """Extract the relations of stored documents' chunks and write them (see :func:`add_relations`)."""
    ids = [document_id(key) for key in keys]
    docs = (yield Call(lambda: store.query("get_document", {"ids": ids}), lambda: store.aquery("get_document", {"ids": ids})))[-1]
    chunks = [(doc, chunk) for doc in docs for chunk in doc["chunks"]]
    found = yield from extractor.graph_plan([chunk["content"] for _, chunk in chunks])
    edges = [
        edge
        for (doc, chunk), extraction in zip(chunks, found.chunks)
        for edge in relation_edges(chunk["id"], doc["id"], extraction.relations, doc.get("access") or [])
    ]
    documents = [doc["id"] for doc in docs]
    yield Call(lambda: write_relations(store, documents, edges), lambda: awrite_relations(store, documents, edges))
    return len(edges)


def add_relations(store: SurrealStore, extractor: LLMExtractor, keys: Sequence[str]) -> int:
    """Give documents already ingested with ``extractor`` their ``RELATES_TO`` edges, until the ingest
    pipeline writes them itself: the chunks are read back and extracted again, which the
    extractor's cache answers without a request when the settings are unchanged. Returns the
    number of edges written."""
    return drive(relations_plan(store, extractor, keys))


async def aadd_relations(store: SurrealStore, extractor: LLMExtractor, keys: Sequence[str]) -> int:
    return await adrive(relations_plan(store, extractor, keys))


# -- the agent tool (argument and result models, and its plan) -------------------------------------


class ConceptRelationsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, str_strip_whitespace=True)

    concept: str = Field(min_length=1, max_length=300, description="a concept name as search_concepts returns it")
    limit: int = Field(20, ge=1, le=100, description="at most this many relations")


class ConceptRelation(BaseModel):
    type: str = Field(description="the relation, e.g. born_in")
    subject: str = Field(description="the subject concept's name")
    object: str = Field(description="the object concept's name")
    in_ontology: bool
    chunk_id: str = Field(description="the passage the relation was read from")
    document_id: str
    title: str | None
    evidence: str = Field(description="the text of that passage")


class ConceptRelations(BaseModel):
    concept: str
    relations: list[ConceptRelation]


def concept_relations_plan(store: SurrealStore, args: ConceptRelationsArgs, access: list[str] | None = None) -> Plan[ConceptRelations]:
    """The typed relations of a concept, in both directions, within the caller's ``access`` labels.
    A store without extracted relations answers with none."""
    from ..extract import normalise_concept

    name = normalise_concept(args.concept, keep_numeric=True) or args.concept
    scope = Scope.of(access=access).compile()
    params = {"concept": concept_id(name), "limit": args.limit, **scope.params}
    rows = yield Call(lambda: store.query("tool_concept_relations", params, filter=scope)[-1],
                      lambda: _last(store.aquery("tool_concept_relations", params, filter=scope)))
    relations = [
        ConceptRelation(
            type=row["type"],
            subject=row["subject_name"],
            object=row["object_name"],
            in_ontology=row["in_ontology"],
            chunk_id=str(row["chunk"].id),
            document_id=str(row["document"].id),
            title=row.get("title"),
            evidence=row.get("evidence") or "",
        )
        for row in rows or []
    ]
    return ConceptRelations(concept=name, relations=relations)


async def _last(results: Any) -> Any:
    return (await results)[-1]
