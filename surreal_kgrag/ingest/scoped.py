"""What a scoped writer may write: documents under its own labels, replacing or deleting only
documents it can read.

An :class:`~surreal_kgrag.ingest.Ingestor` built with a :class:`~surreal_kgrag.retrieval.Scope`
(access labels, a filter; a store signed in as a record user adds ``$auth.access``):

- a document without labels gets the scope's labels; one with a label outside them is refused
  (:func:`labelled`), so every label written is one of the caller's;
- the write transaction refuses to replace a stored document the scope cannot read, and to write
  one it could not read afterwards (``write_documents.surql``): an error naming the id, never an
  overwrite, however many writers race;
- deletes, and the stale parts of a file read again, reach only documents the scope can read
  (:func:`visible`, and again inside each delete's transaction: ``delete_documents.surql``,
  ``retire_document.surql``); bridge edges are added only from chunks it can read;
- a document written in slices (``slices.py``) is refused before anything is written when the
  scope cannot read its stored version, and its marker and stale chunks are touched only for
  documents inside the scope (``pending_write.surql``, ``fragments/scope_inside.surql``).
"""

from __future__ import annotations

from typing import Any

from ..db import SurrealStore
from ..db.sdk import RecordID
from ..models import LoadFailure, SourceDocument
from ..retrieval.scope import Scope


def labelled(doc: SourceDocument, scope: Scope) -> SourceDocument | LoadFailure:
    """``doc`` with the labels a writer in ``scope`` writes it under, or the failure that names
    the labels outside the scope."""
    allowed = scope.access
    if allowed is None:
        return doc
    if not doc.access:
        return doc.model_copy(update={"access": list(allowed)})
    outside = sorted(set(doc.access) - set(allowed))
    if outside:
        return LoadFailure(
            source=doc.source,
            reason=f"document {doc.key!r} carries access labels {outside} outside this caller's labels "
            f"{sorted(allowed)}; it was not written",
        )
    return doc


def visible(store: SurrealStore, ids: list[RecordID], scope: Scope) -> list[RecordID]:
    """The documents among ``ids`` that exist and that ``scope`` can read (all of ``ids`` when
    the scope is unrestricted)."""
    if scope.unrestricted or not ids:
        return ids
    condition = scope.compile()
    rows: list[Any] = store.query("vector_keys", {"ids": ids, **condition.params}, filter=condition)[-1]
    return rows


async def avisible(store: SurrealStore, ids: list[RecordID], scope: Scope) -> list[RecordID]:
    if scope.unrestricted or not ids:
        return ids
    condition = scope.compile()
    rows: list[Any] = (await store.aquery("vector_keys", {"ids": ids, **condition.params}, filter=condition))[-1]
    return rows
