"""Record ids of documents, chunks and concepts: deterministic, so ingesting again is idempotent."""

from __future__ import annotations

from .db.sdk import RecordID


def document_id(key: str) -> RecordID:
    return RecordID("document", key)


def chunk_record_id(key: str, content_hash: str, index: int) -> RecordID:
    """``<document key>::<content hash>::<index>``, unique because neither of the last two parts
    contains ``::``. Two SurrealDB 3.2 behaviours shape it: HNSW search silently skips records whose
    id is an array, and a record deleted and created again inside one transaction is lost or
    rejected, so a changed document gets new chunk ids instead of reusing the old ones."""
    return RecordID("chunk", f"{key}::{content_hash[:12]}::{index:05d}")


def chunk_document_key(chunk_key: str) -> str:
    """The document key inside a chunk key made by ``chunk_record_id``: queries use it to place a
    chunk in its document without loading the chunk record."""
    return chunk_key.rsplit("::", 2)[0]


def concept_id(name: str) -> RecordID:
    return RecordID("concept", name)
