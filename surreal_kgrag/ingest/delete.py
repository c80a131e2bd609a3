"""Deleting documents with their chunks, text rows, edges and the concepts left unmentioned."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from ..db import SurrealStore
from ..db.sdk import RecordID
from ..ids import document_id
from ..models import SourceDocument
from ..retrieval.scope import UNRESTRICTED, Scope
from ..schema import read_meta
from ..surql import NO_FILTER
from .scoped import avisible, visible
from .slices import delete_long

#: Chunks one delete transaction removes at most (IngestConfig.group_chunks' default).
SLICE_CHUNKS = 256


def delete_documents(store: SurrealStore, keys: Iterable[str], scope: Scope = UNRESTRICTED) -> int:
    """Delete documents by key with their chunks and edges, and the concepts left unmentioned.
    A text file stored in parts (``<path>#part-00001``, ...) is deleted by its path. Only the
    documents ``scope`` can read are deleted. Returns how many documents existed and were deleted."""
    keys = list(keys)
    if not keys or read_meta(store) is None:
        return 0
    parts = [row["id"] for row in store.query("document_parts", {"sources": keys})[-1]]
    return delete_records(store, visible(store, _distinct([*(document_id(k) for k in keys), *parts]), scope))


async def adelete_documents(store: SurrealStore, keys: Iterable[str], scope: Scope = UNRESTRICTED) -> int:
    keys = list(keys)
    if not keys or not (await store.aquery("store_meta"))[-1]:
        return 0
    parts = [row["id"] for row in (await store.aquery("document_parts", {"sources": keys}))[-1]]
    ids = await avisible(store, _distinct([*(document_id(k) for k in keys), *parts]), scope)
    return await asyncio.to_thread(delete_records, store, ids) if ids else 0


def delete_records(store: SurrealStore, ids: list[RecordID], slice_chunks: int = SLICE_CHUNKS) -> int:
    """Delete exactly these document records; returns how many existed. The documents of at most
    ``slice_chunks`` chunks go in one transaction, each longer one in bounded steps (slices.py)."""
    if not ids:
        return 0
    ids = _distinct(ids)
    counts = store.query("document_chunk_counts", {"ids": ids}, filter=NO_FILTER)[-1]
    long = {str(row["id"].id) for row in counts if (row.get("chunk_count") or 0) > slice_chunks}
    short = [rid for rid in ids if str(rid.id) not in long]
    deleted = int(store.query("delete_documents", {"doc_ids": short})[-1] or 0) if short else 0
    return deleted + sum(delete_long(store, rid, slice_chunks) for rid in ids if str(rid.id) in long)


def stale_parts(store: SurrealStore, docs: list[SourceDocument], scope: Scope = UNRESTRICTED) -> list[RecordID]:
    """Stored documents of the same files as ``docs`` that the files no longer produce: the parts
    past a shorter file's end, the whole-file document of a file now read in parts, or the parts of
    a file now read whole; only those ``scope`` can read."""
    expected: dict[str, set[str]] = {}
    for doc in docs:
        parts = doc.metadata.get("parts")
        if doc.key == doc.source:
            expected[doc.source] = {doc.key}
        elif isinstance(parts, int) and doc.key.startswith(f"{doc.source}#part-"):
            expected[doc.source] = {f"{doc.source}#part-{i:05d}" for i in range(1, parts + 1)}
    if not expected:
        return []
    rows: list[dict[str, Any]] = store.query("document_parts", {"sources": list(expected)})[-1]
    return visible(store, [row["id"] for row in rows if row["id"].id not in expected.get(row["source"], set())], scope)


def _distinct(ids: list[RecordID]) -> list[RecordID]:
    return list({str(rid.id): rid for rid in ids}.values())
