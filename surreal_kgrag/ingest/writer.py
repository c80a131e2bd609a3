"""Writes prepared documents in small all-or-nothing groups (``write_documents.surql``).

A group that fails is written again one document at a time, so one bad document is reported and the
others are written. A group that lost a write conflict to another writer is written again.

A document longer than a group is written in slices of a group's size (``slices.py``): one
transaction holding everything would grow with the document, and SurrealDB slows down sharply and
holds memory as one transaction's write set grows. Readers see no part of it before its row is
committed, and the version it replaces until then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from ..db import SurrealStore
from ..errors import QueryExecutionError, is_conflict
from ..models import ConceptMention, IngestSummary, LoadFailure
from ..surql import NO_FILTER, CompiledFilter
from .bridges import link
from .concepts import concept_record
from .records import PreparedDocument, groups
from .slices import claim, done, remove_stale, slices, version

logger = logging.getLogger(__name__)

ATTEMPTS = 4
#: What a write may raise for one document: the engine's refusal, or a value the SDK cannot encode
#: (ValueError, OverflowError, TypeError: the loaders check values first; this is the backstop).
WRITE_ERRORS = (QueryExecutionError, ValueError, OverflowError, TypeError)
#: How write_documents.surql's refusals of a scoped writer begin.
SCOPE_REFUSAL = "outside the caller's scope: "


class Writer:
    """Writes batches for one run and keeps its counts in ``summary``; used from one thread."""

    def __init__(
        self,
        store: SurrealStore,
        summary: IngestSummary,
        *,
        group_size: int,
        group_chunks: int,
        vector_min_chunks: int,
        scope: CompiledFilter = NO_FILTER,
        on_written: Callable[[int, int], None] = lambda docs, chunks: None,
    ) -> None:
        self.store = store
        self.summary = summary
        self.group_size = group_size
        self.group_chunks = group_chunks
        self.vector_min_chunks = vector_min_chunks
        self.scope = scope
        self.on_written = on_written
        self.relations_written = 0
        # Why each document of this run that failed to write failed, by key (an echo of it fails too).
        self.failed: dict[str, str] = {}

    def write(self, prepared: list[PreparedDocument], stop: Callable[[], bool]) -> None:
        for group in groups(prepared, self.group_size, self.group_chunks):
            if stop():
                return
            if group[0].size > self.group_chunks:  # groups() gives a longer document a group of its own
                self._write_in_slices(group[0], stop)
            else:
                self._write_group(group)

    def _write_group(self, group: list[PreparedDocument]) -> None:
        try:
            created = self._retrying(lambda: self._write(group))
        except WRITE_ERRORS as error:
            self._isolate(group, error)
            return
        self._count(group, created)

    def _write_in_slices(self, item: PreparedDocument, stop: Callable[[], bool]) -> None:
        """Slices of the chunks, each a transaction, then the row (``commit_document.surql``); the
        chunks of the version replaced, or of this one when it failed or was stopped, are removed
        after (bounded transactions too). A ``pending_write`` row, renewed per slice, lets a later
        run finish that removal when the process dies meanwhile. A scoped writer is refused a stored
        document it cannot read before it touches anything of it (its row, chunks or marker)."""
        doc_id = item.record["id"]
        created = 0
        committed = False
        counted: set[Any] = set()  # the concepts the slices written so far mention
        try:
            claim(self.store, doc_id, self.scope)
            remove_stale(self.store, doc_id, self.group_chunks, self.scope)  # what a crashed write of this document left
        except WRITE_ERRORS as error:
            self._fail(item, error)
            return
        try:
            for part in slices(item, self.group_chunks):
                if stop():
                    break
                created += self._retrying(partial(self._write, [part], counted))
                claim(self.store, doc_id, self.scope)
            else:
                self._retrying(partial(self._commit, item))
                committed = True
        except WRITE_ERRORS as error:
            self._fail(item, error)
        finally:
            try:
                remove_stale(self.store, doc_id, self.group_chunks, self.scope)
                done(self.store, doc_id, self.scope)
            except WRITE_ERRORS as error:
                # Readers see only the committed version; its pending_write row stays, and the next
                # run removes the other chunks (finish_pending_writes).
                logger.warning("the old chunks of %s were not removed (%s): the next ingest removes them", item.doc.source, error)
        if committed:
            self._count([item], created)

    def _retrying(self, write: Callable[[], int]) -> int:
        """``write()``, again when it lost a write conflict to another writer. The store already
        retries the transaction itself (``db/retry.py``) with the same parameters; this retries from
        the reads those parameters came from (the bridges, the concepts earlier slices mention),
        which the writer that won may have changed."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return write()
            except QueryExecutionError as error:
                if attempt < ATTEMPTS and is_conflict(error):
                    continue
                raise
        raise AssertionError("unreachable")

    def _isolate(self, group: list[PreparedDocument], error: Exception) -> None:
        if len(group) > 1:
            for item in group:
                self._write_group([item])
            return
        self._fail(group[0], error)

    def _fail(self, item: PreparedDocument, error: Exception) -> None:
        message = str(error)
        if SCOPE_REFUSAL in message:  # write_documents.surql's own words, without the engine's wrapping
            message = SCOPE_REFUSAL + message.split(SCOPE_REFUSAL, 1)[1]
        self.summary.failures.append(LoadFailure(source=item.doc.source, reason=f"write failed: {message}"))
        self.failed[item.doc.key] = f"that write failed: {message}"
        self.on_written(1, 0)

    def _write(self, group: list[PreparedDocument], counted: set[Any] | None = None) -> int:
        """One transaction; returns how many concepts it created. Without ``counted`` the group's
        documents are complete: their rows are written and their stored chunks replaced. With it the
        group is one slice of a document (no row, nothing replaced) and ``counted`` holds the
        concepts its earlier slices mention; the slice's are added to it once written."""
        bridges = link(self.store, group, self.scope)  # adds forward bridges to the group's edges and concepts
        whole = counted is None
        first = [] if counted is None else _first_mentions(group, counted)
        concepts = concept_records(group)
        created: int = self.store.query(
            "write_documents",
            {
                "doc_ids": [item.record["id"] for item in group],
                "replace_ids": [item.record["id"] for item in group] if whole else [],
                "documents": [item.record for item in group] if whole else [],
                "concepts": concepts,
                "chunks": [c for item in group for c in item.chunks],
                "texts": [t for item in group for t in item.texts],
                "edges": [e for item in group for e in item.edges],
                "relations": [r for item in group for r in item.relations],
                "document_names": [n for item in group for n in item.names] if whole else [],
                "bridges": bridges,
                "vector_min_chunks": self.vector_min_chunks,
                "first_mentions": first,
                **self.scope.params,
            },
            scope=self.scope,
        )[-1]
        if counted is not None:
            counted.update(mention["concept"] for mention in first)
        return created

    def _commit(self, item: PreparedDocument) -> int:
        params = {
            "doc_ids": [item.record["id"]],
            "documents": [item.record],
            "document_names": item.names,
            "version": version(item),
            **self.scope.params,
        }
        self.store.query("commit_document", params, scope=self.scope)
        return 0

    def _count(self, group: list[PreparedDocument], created: int) -> None:
        chunks = 0
        for item in group:
            self.failed.pop(item.doc.key, None)  # a later version of it was written
            if item.exists:
                self.summary.updated += 1
                self.summary.replaced_chunks += item.replaced_chunks
            else:
                self.summary.added += 1
            chunks += len(item.chunks)
            self.summary.edges += len(item.edges)
            self.relations_written += len(item.relations)
        self.summary.chunks += chunks
        self.summary.concepts += created
        self.on_written(len(group), chunks)


def concept_records(group: list[PreparedDocument]) -> list[dict[str, Any]]:
    """A record for every concept the group mentions, by name; the first document's mention names a
    concept the write creates."""
    mentions: dict[str, ConceptMention] = {}
    for item in group:
        for name, mention in item.concepts.items():
            mentions.setdefault(name, mention)
    return [concept_record(mentions[name]) for name in sorted(mentions)]


def _first_mentions(group: list[PreparedDocument], counted: set[Any]) -> list[dict[str, Any]]:
    """The concepts the group's edges mention that ``counted`` does not hold, with their ``own``
    flag (the same on every edge of one document to one concept: a title or alias is its own)."""
    first: dict[Any, bool] = {}
    for item in group:
        for edge in item.edges:
            if edge["out"] not in counted:
                first.setdefault(edge["out"], edge["own"])
    return [{"concept": concept, "own": own} for concept, own in first.items()]
