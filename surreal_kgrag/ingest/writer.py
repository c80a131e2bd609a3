"""Writes prepared documents in small all-or-nothing groups (``write_documents.surql``).

A group that fails is written again one document at a time, so one bad document is reported and the
others are written. A group that lost a write conflict to another writer is written again.
"""

from __future__ import annotations

from collections.abc import Callable

from ..db import SurrealStore
from ..errors import QueryExecutionError
from ..models import ConceptMention, IngestSummary, LoadFailure
from ..surql import NO_FILTER, CompiledFilter
from .bridges import link
from .concepts import concept_record
from .records import PreparedDocument, groups

ATTEMPTS = 4
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

    def write(self, prepared: list[PreparedDocument], stop: Callable[[], bool]) -> None:
        for group in groups(prepared, self.group_size, self.group_chunks):
            if stop():
                return
            self._write_group(group)

    def _write_group(self, group: list[PreparedDocument]) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                created = self._write(group)
            except QueryExecutionError as error:
                if attempt < ATTEMPTS and "conflict" in str(error).lower():
                    continue
                self._isolate(group, error)
                return
            except (ValueError, OverflowError) as error:  # a value the SDK cannot encode
                self._isolate(group, error)
                return
            self._count(group, created)
            return

    def _isolate(self, group: list[PreparedDocument], error: Exception) -> None:
        if len(group) > 1:
            for item in group:
                self._write_group([item])
            return
        item = group[0]
        message = str(error)
        if SCOPE_REFUSAL in message:  # write_documents.surql's own words, without the engine's wrapping
            message = SCOPE_REFUSAL + message.split(SCOPE_REFUSAL, 1)[1]
        self.summary.failures.append(LoadFailure(source=item.doc.source, reason=f"write failed: {message}"))
        self.on_written(1, 0)

    def _write(self, group: list[PreparedDocument]) -> int:
        """One transaction; returns how many concepts it created."""
        bridges = link(self.store, group, self.scope)  # adds forward bridges to the group's edges and concepts
        mentions: dict[str, ConceptMention] = {}
        for item in group:
            for name, mention in item.concepts.items():
                mentions.setdefault(name, mention)  # the first document's mention names a new concept
        names = sorted(mentions)
        concepts = [
            {
                **concept_record(mentions[name]),
                "df": sum(name in item.concepts for item in group),
                "titled": any(name in item.own_names for item in group),
            }
            for name in names
        ]
        created: int = self.store.query(
            "write_documents",
            {
                "doc_ids": [item.record["id"] for item in group],
                "documents": [item.record for item in group],
                "concepts": concepts,
                "chunks": [c for item in group for c in item.chunks],
                "texts": [t for item in group for t in item.texts],
                "edges": [e for item in group for e in item.edges],
                "relations": [r for item in group for r in item.relations],
                "document_names": [n for item in group for n in item.names],
                "bridges": bridges,
                "vector_min_chunks": self.vector_min_chunks,
                **self.scope.params,
            },
            scope=self.scope,
        )[-1]
        return created

    def _count(self, group: list[PreparedDocument], created: int) -> None:
        chunks = 0
        for item in group:
            if item.exists:
                self.summary.updated += 1
            else:
                self.summary.added += 1
            chunks += len(item.chunks)
            self.summary.edges += len(item.edges)
            self.relations_written += len(item.relations)
        self.summary.chunks += chunks
        self.summary.concepts += created
        self.on_written(len(group), chunks)
