"""Long documents in bounded transactions.

A document longer than one write group is written as slices of its chunks (``write_documents.surql``
without a row), then committed by writing its row (``commit_document.surql``): readers only show a
chunk of the version its document row names (``fragments/current_version.surql``), so they see the
old version until the commit and the new one, whole, after it. The chunks of the other version are
then removed a slice at a time (``remove_stale_chunks.surql``), and a long document is deleted the
same way: its row first, its chunks after. A ``pending_write`` row stands for each such write while
it runs; one that a crash left is finished by the next ingest run (:func:`finish_pending_writes`).
A scoped caller (``scope``, a compiled :class:`~surreal_kgrag.retrieval.Scope`) claims, cleans up,
deletes and finishes only documents that are not stored or that it can read: each query checks it.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..db import SurrealStore
from ..db.sdk import RecordID
from ..surql import NO_FILTER, CompiledFilter
from .records import PreparedDocument

#: A pending_write row not renewed for this long was left by a process that died: a slice is
#: renewed after every transaction, and no transaction of a bounded slice takes minutes.
ABANDONED_AFTER = datetime.timedelta(minutes=15)


def version(item: PreparedDocument) -> str:
    """The content hash part of the document's chunk ids (``ids.chunk_record_id``)."""
    return str(item.doc.content_hash)[:12]


def slices(item: PreparedDocument, size: int) -> Iterator[PreparedDocument]:
    """The document as consecutive slices of at most ``size`` chunks, each with its own chunks'
    texts, edges, relations and the concepts those edges mention (each in the document's order).
    Everything is sorted into its slice in one pass: filtering the whole document's edges for each
    slice took time quadratic in its length (a 20 MB file has 84 slices of 340,000 edges)."""
    count = (len(item.chunks) + size - 1) // size
    slice_of = {str(chunk["id"].id): position // size for position, chunk in enumerate(item.chunks)}
    edges: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    mentioned_in: dict[str, set[int]] = defaultdict(set)  # concept name -> the slices whose edges name it
    for edge in item.edges:
        number = slice_of.get(str(edge["in"].id))
        if number is not None:
            edges[number].append(edge)
            mentioned_in[str(edge["out"].id)].add(number)
    relations: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    for relation in item.relations:
        number = slice_of.get(str(relation["chunk"].id))
        if number is not None:
            relations[number].append(relation)
    concepts: list[dict[str, Any]] = [{} for _ in range(count)]
    for name, mention in item.concepts.items():
        for number in mentioned_in.get(name, ()):
            concepts[number][name] = mention
    for number, start in enumerate(range(0, len(item.chunks), size)):
        yield dataclasses.replace(
            item,
            chunks=item.chunks[start : start + size],
            texts=item.texts[start : start + size],
            edges=edges[number],
            relations=relations[number],
            concepts=concepts[number],
            names=[],
        )


def remove_stale(store: SurrealStore, doc_id: RecordID, size: int, scope: CompiledFilter = NO_FILTER) -> int:
    """Remove the chunks of ``doc_id`` that are not of its stored version (all of them when it has
    no row), ``size`` per transaction; returns how many went (none when ``scope`` cannot read it)."""
    removed = 0
    while True:
        params = {"doc": doc_id, "limit": size, **scope.params}
        gone = int(store.query("remove_stale_chunks", params, scope=scope)[-1] or 0)
        removed += gone
        if gone < size:
            return removed


def delete_long(store: SurrealStore, doc_id: RecordID, size: int, scope: CompiledFilter = NO_FILTER) -> int:
    """Delete a long document in bounded steps: its row (readers no longer see it), then its chunks
    ``size`` at a time. Returns 1 when it existed and ``scope`` could read it."""
    existed = int(store.query("retire_document", {"doc": doc_id, **scope.params}, scope=scope)[-1] or 0)
    remove_stale(store, doc_id, size, scope)
    done(store, doc_id, scope)
    return existed


def claim(store: SurrealStore, doc_id: RecordID, scope: CompiledFilter = NO_FILTER) -> None:
    """Write or renew the pending_write row of ``doc_id``; a ``QueryExecutionError`` (the refusal
    ``write_documents.surql`` gives) when the document is stored and ``scope`` cannot read it."""
    store.query("pending_write", {"doc": doc_id, **scope.params}, scope=scope)


def done(store: SurrealStore, doc_id: RecordID, scope: CompiledFilter = NO_FILTER) -> None:
    """Remove the pending_write row of ``doc_id`` (kept when ``scope`` cannot read the document)."""
    store.query("pending_write_done", {"doc": doc_id, **scope.params}, scope=scope)


def finish_pending_writes(
    store: SurrealStore,
    size: int,
    abandoned_after: datetime.timedelta = ABANDONED_AFTER,
    scope: CompiledFilter = NO_FILTER,
) -> int:
    """Finish the writes in slices that a dead process left (their pending_write row not renewed
    for ``abandoned_after``): remove their chunks not of the stored version. Only the documents
    ``scope`` may change (not stored, or readable). Returns how many."""
    params = {"abandoned_secs": int(abandoned_after.total_seconds()), **scope.params}
    docs: list[RecordID] = store.query("pending_writes", params, scope=scope)[-1]
    for doc_id in docs:
        remove_stale(store, doc_id, size, scope)
        done(store, doc_id, scope)
    return len(docs)
