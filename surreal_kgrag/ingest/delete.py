"""Deleting documents with their chunks, text rows, edges and the concepts left unmentioned.

Short documents go in groups of at most ``group_chunks`` chunks, one transaction each; a longer one
in bounded steps (``slices.delete_long``). A scoped caller's scope is checked inside each of those
transactions (``delete_documents.surql``, ``retire_document.surql``): a document replaced since it
was listed, under labels outside the scope, is not deleted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

from ..checks import IDS_PER_QUERY, batches
from ..db import SurrealStore
from ..db.sdk import RecordID
from ..ids import document_id
from ..models import SourceDocument
from ..retrieval.scope import UNRESTRICTED, Scope
from ..schema import read_meta
from ..surql import NO_FILTER
from .config import IngestConfig
from .scoped import avisible, visible
from .slices import delete_long

#: Chunks one delete transaction removes at most, unless the caller passes its own (IngestConfig.group_chunks).
SLICE_CHUNKS: int = IngestConfig.model_fields["group_chunks"].default


def delete_documents(
    store: SurrealStore, keys: Iterable[str], scope: Scope = UNRESTRICTED, slice_chunks: int = SLICE_CHUNKS
) -> int:
    """Delete documents by key with their chunks and edges, and the concepts left unmentioned.
    A text file stored in parts (``<path>#part-00001``, ...) is deleted by its path. Only the
    documents ``scope`` can read are deleted. Returns how many documents existed and were deleted."""
    keys = list(dict.fromkeys(keys))
    if not keys or read_meta(store) is None:
        return 0
    ids: list[RecordID] = []
    for batch in batches(keys, IDS_PER_QUERY):
        parts = [row["id"] for row in store.query("document_parts", {"sources": batch})[-1]]
        ids += visible(store, _distinct([*(document_id(k) for k in batch), *parts]), scope)
    return delete_records(store, ids, slice_chunks, scope)


async def adelete_documents(
    store: SurrealStore, keys: Iterable[str], scope: Scope = UNRESTRICTED, slice_chunks: int = SLICE_CHUNKS
) -> int:
    keys = list(dict.fromkeys(keys))
    if not keys or not (await store.aquery("store_meta"))[-1]:
        return 0
    ids: list[RecordID] = []
    for batch in batches(keys, IDS_PER_QUERY):
        parts = [row["id"] for row in (await store.aquery("document_parts", {"sources": batch}))[-1]]
        ids += await avisible(store, _distinct([*(document_id(k) for k in batch), *parts]), scope)
    return await asyncio.to_thread(delete_records, store, ids, slice_chunks, scope) if ids else 0


def delete_records(
    store: SurrealStore, ids: list[RecordID], slice_chunks: int = SLICE_CHUNKS, scope: Scope = UNRESTRICTED
) -> int:
    """Delete exactly these document records (those of them ``scope`` can read, checked in each
    transaction); returns how many existed and went. Short documents go in transactions of at most
    ``slice_chunks`` chunks, each longer one in bounded steps (slices.py)."""
    if not ids:
        return 0
    ids = _distinct(ids)
    condition = scope.compile()
    counts: dict[str, int] = {}
    for batch in batches(ids, IDS_PER_QUERY):
        rows = store.query("document_chunk_counts", {"ids": batch}, filter=NO_FILTER)[-1]
        counts |= {str(row["id"].id): row.get("chunk_count") or 0 for row in rows}
    long = [rid for rid in ids if counts.get(str(rid.id), 0) > slice_chunks]
    deleted = 0
    for group in _groups([rid for rid in ids if counts.get(str(rid.id), 0) <= slice_chunks], counts, slice_chunks):
        params = {"doc_ids": group, **condition.params}
        deleted += int(store.query("delete_documents", params, scope=condition)[-1] or 0)
    return deleted + sum(delete_long(store, rid, slice_chunks, condition) for rid in long)


def stale_parts(store: SurrealStore, docs: list[SourceDocument], scope: Scope = UNRESTRICTED) -> list[tuple[RecordID, str]]:
    """Stored documents of the same files as ``docs`` that the files no longer produce, with their
    file: the parts past a shorter file's end, the whole-file document of a file now read in parts,
    or the parts of a file now read whole; only those ``scope`` can read."""
    expected: dict[str, set[str]] = {}
    for doc in docs:
        if doc.key == doc.source:
            expected[doc.source] = {doc.key}
        elif doc.parts is not None and doc.key.startswith(f"{doc.source}#part-"):
            expected[doc.source] = {f"{doc.source}#part-{i:05d}" for i in range(1, doc.parts + 1)}
    if not expected:
        return []
    rows: list[dict[str, Any]] = store.query("document_parts", {"sources": list(expected)})[-1]
    stale = {str(row["id"]): row["source"] for row in rows if row["id"].id not in expected.get(row["source"], set())}
    return [(rid, stale[str(rid)]) for rid in visible(store, [row["id"] for row in rows if str(row["id"]) in stale], scope)]


def _groups(ids: list[RecordID], counts: dict[str, int], size: int) -> Iterator[list[RecordID]]:
    """Consecutive groups of ``ids`` holding at most ``size`` chunks (a document counts at least one)."""
    group: list[RecordID] = []
    chunks = 0
    for rid in ids:
        n = max(counts.get(str(rid.id), 0), 1)
        if group and chunks + n > size:
            yield group
            group, chunks = [], 0
        group.append(rid)
        chunks += n
    if group:
        yield group


def _distinct(ids: list[RecordID]) -> list[RecordID]:
    return list({str(rid.id): rid for rid in ids}.values())
