"""The write side of a vector store: texts made into documents under caller ids, ingested, and the
ids returned, or a :class:`VectorWriteError` naming the texts that could not be written."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import IDS_PER_QUERY, batches
from ..errors import ConfigurationError, KGRagError
from ..ids import document_id
from ..ingest import Ingestor
from ..models import IngestSummary, LoadFailure, SourceDocument
from ..retrieval import Scope
from ..retrieval import plan as plans
from ..retrieval.plan import Plan, Query
from .filters import text_key

__all__ = ["VectorWriteError", "awrite_documents", "source_documents", "write_documents"]


class VectorWriteError(KGRagError):
    """Some texts could not be written; the others were. ``failures`` names each one and why."""

    def __init__(self, failures: list[LoadFailure], stored: list[str]) -> None:
        listed = "; ".join(str(f) for f in failures[:5]) + ("; ..." if len(failures) > 5 else "")
        super().__init__(f"{len(failures)} of {len(failures) + len(stored)} texts were not stored: {listed}")
        self.failures = failures
        self.stored = stored


def source_documents(
    texts: Sequence[str],
    metadatas: Sequence[Mapping[str, Any] | None] | None,
    ids: Sequence[str | None] | None,
    *,
    source: str,
    labels: list[str],
) -> list[SourceDocument]:
    """One document per text, keyed by its id (a uuid4 when None), its ``source`` ``<source>:<id>``,
    carrying ``labels``."""
    if isinstance(texts, str):
        raise ConfigurationError("add takes a list of texts, not one string")
    texts = list(texts)
    metadatas = list(metadatas) if metadatas is not None else [None] * len(texts)
    given = list(ids) if ids is not None else [None] * len(texts)
    if len(metadatas) != len(texts) or len(given) != len(texts):
        raise ConfigurationError(
            f"got {len(texts)} texts, {len(metadatas)} metadatas and {len(given)} ids: give one of each per text"
        )
    keys = [text_key(i, key) if key is not None else str(uuid.uuid4()) for i, key in enumerate(given)]
    documents = []
    for i, (text, metadata, key) in enumerate(zip(texts, metadatas, keys)):
        if not isinstance(text, str):
            raise ConfigurationError(f"text {i} is a {type(text).__name__}, expected str")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ConfigurationError(f"metadata {i} is a {type(metadata).__name__}, expected a dict")
        documents.append(
            SourceDocument(key=key, text=text, source=f"{source}:{key}", metadata=dict(metadata or {}), access=labels)
        )
    return documents


def write_documents(ingestor: Ingestor, documents: Sequence[SourceDocument]) -> list[str]:
    """Ingest ``documents`` and return their keys, in order; when some could not be written (the
    others are), raise :class:`VectorWriteError` naming them."""
    documents = list(documents)
    if not documents:
        return []
    summary = ingestor.ingest(documents)
    return plans.run(ingestor.store, _written(summary, documents, ingestor.scope))


async def awrite_documents(ingestor: Ingestor, documents: Sequence[SourceDocument]) -> list[str]:
    documents = list(documents)
    if not documents:
        return []
    summary = await ingestor.aingest(documents)
    return await plans.arun(ingestor.store, _written(summary, documents, ingestor.scope))


def _written(summary: IngestSummary, documents: list[SourceDocument], scope: Scope) -> Plan[list[str]]:
    keys = [doc.key for doc in documents]
    if not summary.failures:
        return keys
    # Which ones made it: the stored version is the one given (a failed update keeps the old one).
    condition = scope.compile()
    stored: dict[str, str] = {}
    for batch in batches(list(dict.fromkeys(keys)), IDS_PER_QUERY):
        params = {"ids": [document_id(key) for key in batch], **condition.params}
        rows = (yield Query("document_hashes", params, {"filter": condition}))[-1]
        stored |= {str(row["id"].id): row["content_hash"] for row in rows}
    written = [doc.key for doc in documents if stored.get(doc.key) == doc.content_hash]
    raise VectorWriteError(summary.failures, written)
