"""Writes prepared documents in small all-or-nothing groups (``write_documents.surql``).

A group that fails is written again one document at a time, so one bad document is reported and the
others are written. A group that names a concept the store no longer has (deleted since the batch
looked) gets that concept embedded and is written again; so does a group that lost a write conflict
to another writer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..embed import Embedder
from ..errors import QueryExecutionError
from ..ids import concept_id
from ..models import IngestSummary, LoadFailure
from ..store import SurrealStore
from .bridges import link
from .concepts import ConceptClaims, concept_records, missing_concepts
from .records import PreparedDocument, groups

MISSING_CONCEPTS = "kgrag:missing-concepts"  # thrown by write_documents.surql
ATTEMPTS = 4


class Writer:
    """Writes batches for one run and keeps its counts in ``summary``; used from one thread."""

    def __init__(
        self,
        store: SurrealStore,
        embedder: Embedder,
        claims: ConceptClaims,
        summary: IngestSummary,
        *,
        group_size: int,
        group_chunks: int,
        on_written: Callable[[int, int], None] = lambda docs, chunks: None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.claims = claims
        self.summary = summary
        self.group_size = group_size
        self.group_chunks = group_chunks
        self.on_written = on_written
        # Concept records embedded for this run and not written yet, by name. A batch's new concepts
        # are written by the first group that mentions them; one whose documents all failed waits
        # here for a later group that mentions it.
        self.pending: dict[str, dict[str, Any]] = {}
        self.vectors_written = 0
        self.relations_written = 0

    def write(self, prepared: list[PreparedDocument], new_concepts: dict[str, dict[str, Any]], stop: Callable[[], bool]) -> None:
        self.pending.update(new_concepts)
        for group in groups(prepared, self.group_size, self.group_chunks):
            if stop():
                return
            self._write_group(group)

    def _write_group(self, group: list[PreparedDocument]) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                created = self._write(group)
            except QueryExecutionError as error:
                message = str(error)
                if attempt < ATTEMPTS and MISSING_CONCEPTS in message:
                    self._embed_missing(group)
                    continue
                if attempt < ATTEMPTS and "conflict" in message.lower():
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
        self.summary.failures.append(LoadFailure(source=item.doc.source, reason=f"write failed: {error}"))
        self.on_written(1, 0)

    def _write(self, group: list[PreparedDocument]) -> int:
        """One transaction; returns how many concept records it sent for creation."""
        bridges = link(self.store, group)  # adds forward bridges to the group's edges and concepts
        names = sorted({name for item in group for name in item.concepts})
        created = [
            {
                **self.pending[name],
                "df": sum(name in item.concepts for item in group),
                "titled": any(name in item.own_names for item in group),
            }
            for name in names
            if name in self.pending
        ]
        self.store.query(
            "write_documents",
            {
                "doc_ids": [item.record["id"] for item in group],
                "documents": [item.record for item in group],
                "concepts": created,
                "concept_ids": [concept_id(name) for name in names],
                "chunks": [c for item in group for c in item.chunks],
                "texts": [t for item in group for t in item.texts],
                "edges": [e for item in group for e in item.edges],
                "relations": [r for item in group for r in item.relations],
                "bridges": bridges,
            },
        )
        written = [c["name"] for c in created]
        for name in written:
            del self.pending[name]
        self.claims.release(written)
        return len(created)

    def _embed_missing(self, group: list[PreparedDocument]) -> None:
        """Embed the concepts of ``group`` that the store lacks and this run holds no record for."""
        mentions = {name: m for item in group for name, m in item.concepts.items()}
        missing = missing_concepts(self.store, set(mentions) - set(self.pending))
        self.pending.update(concept_records(self.embedder, {name: mentions[name] for name in missing}))

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
        self.vectors_written += created + chunks
        self.on_written(len(group), chunks)
