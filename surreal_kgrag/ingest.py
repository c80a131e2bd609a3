"""The ingestion pipeline: load -> chunk -> extract concepts -> embed -> write, in batches.

Each small group of documents is written in one transaction (documents, chunks, new concepts,
``MENTIONS_CONCEPT`` edges, concept frequencies and orphan clean-up), so a crash never leaves a
document half-written. Unchanged documents (same content hash) are skipped; changed ones have their
chunks and edges replaced. Concepts already in the store are never embedded again.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from surrealdb import RecordID
from tqdm.auto import tqdm

from . import wire
from .chunking import SentenceChunker
from .embed import Embedder, resolve_embedder
from .errors import LoaderError, QueryExecutionError
from .extract import ConceptExtractor, MetadataConceptExtractor, resolve_extractor
from .ids import chunk_record_id, concept_id, document_id
from .loaders import from_text, iter_sources
from .models import ConceptMention, IngestSummary, LoadFailure, SourceDocument
from .schema import IndexSettings, aensure_schema, ensure_schema, read_meta
from .store import SurrealStore


class IngestConfig(BaseModel):
    """How documents are cut up and written. Defaults suit passages of a few hundred words."""

    model_config = ConfigDict(frozen=True)

    chunker: SentenceChunker = Field(default_factory=SentenceChunker)
    metadata_concepts: tuple[str, ...] = Field(
        ("title", "author", "tags", "keywords"),
        description="document fields (title or metadata keys) whose values become concepts linked to every chunk",
    )
    batch_size: int = Field(256, ge=1, description="documents run through the models together")
    group_size: int = Field(16, ge=1, le=512, description="documents written per transaction")
    index: IndexSettings = Field(
        default_factory=IndexSettings, description="HNSW settings of a new store, and when a run's writes rebuild the search indexes"
    )
    title_in_context: bool = Field(
        True,
        description="embed and full-text index each chunk under its document title (a passage often names its subject only there)",
    )
    show_progress: bool | None = Field(None, description="progress bar; None shows it when stderr is a terminal")


@dataclass
class _Prepared:
    """A document ready to write: its records and the concepts its chunks mention."""

    doc: SourceDocument
    record: dict[str, Any]
    chunks: list[dict[str, Any]]
    texts: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    concepts: dict[str, ConceptMention] = field(default_factory=dict)


class Ingestor:
    """Writes documents into a knowledge-graph store.

    >>> ingestor = Ingestor(SurrealStore("mem://"))
    >>> summary = ingestor.ingest(["docs/", "notes.md"])
    """

    def __init__(
        self,
        store: SurrealStore,
        *,
        embedder: Embedder | Any = None,
        extractor: ConceptExtractor | Any = None,
        config: IngestConfig | None = None,
    ) -> None:
        self.store = store
        self.embedder = resolve_embedder(embedder)
        self.extractor = resolve_extractor(extractor)
        self.config = config or IngestConfig()
        self._metadata_extractor = MetadataConceptExtractor(self.config.metadata_concepts)
        self._known_concepts: set[str] = set()
        self._schema_ready = False

    def _in_context(self, doc: SourceDocument, text: str) -> str:
        if self.config.title_in_context and doc.title and doc.title.strip():
            return f"{doc.title.strip()}\n{text}"
        return text

    # -- public API ------------------------------------------------------------------------------

    def ingest(self, inputs: Iterable[Any] | str | os.PathLike[str], **loader_options: Any) -> IngestSummary:
        """Ingest files, folders, ``SourceDocument``s, LangChain or LlamaIndex documents."""
        if isinstance(inputs, (str, os.PathLike)):
            inputs = [inputs]
        return self._run(iter_sources(inputs, **loader_options))

    def ingest_texts(
        self,
        texts: Sequence[str],
        *,
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        titles: Sequence[str | None] | None = None,
    ) -> IngestSummary:
        """Ingest raw strings; ``ids`` make re-ingestion idempotent (default: a hash of the text)."""
        return self._run(_texts_as_documents(texts, metadatas, ids, titles))

    def delete(self, keys: Iterable[str]) -> int:
        """Delete documents by key with their chunks and edges; returns how many existed."""
        return delete_documents(self.store, keys)

    async def aingest(self, inputs: Iterable[Any] | str | os.PathLike[str], **loader_options: Any) -> IngestSummary:
        """Async ``ingest``: the model-bound pipeline runs in a worker thread, off the event loop."""
        await self._aensure_schema()
        return await asyncio.to_thread(self.ingest, inputs, **loader_options)

    async def aingest_texts(self, texts: Sequence[str], **kwargs: Any) -> IngestSummary:
        await self._aensure_schema()
        return await asyncio.to_thread(self.ingest_texts, texts, **kwargs)

    async def adelete(self, keys: Iterable[str]) -> int:
        return await adelete_documents(self.store, keys)

    # -- pipeline --------------------------------------------------------------------------------

    def _ensure_schema(self) -> None:
        if not self._schema_ready:
            ensure_schema(
                self.store, dimension=self.embedder.dimension, embedder=self.embedder.name, settings=self.config.index
            )
            self._schema_ready = True

    async def _aensure_schema(self) -> None:
        if not self._schema_ready:
            dimension = await asyncio.to_thread(lambda: self.embedder.dimension)
            await aensure_schema(self.store, dimension=dimension, embedder=self.embedder.name, settings=self.config.index)
            self._schema_ready = True

    def _run(self, sources: Iterable[SourceDocument | LoadFailure]) -> IngestSummary:
        started = time.perf_counter()
        self._ensure_schema()
        summary = IngestSummary()
        timings = {stage: 0.0 for stage in ("load", "chunk", "extract", "embed", "write", "index")}
        show = self.config.show_progress
        progress = tqdm(
            desc="ingest", unit="doc", disable=(not sys.stderr.isatty()) if show is None else not show, file=sys.stderr
        )
        try:
            for batch in _batches(_timed(sources, timings), self.config.batch_size):
                docs: list[SourceDocument] = []
                for item in batch:
                    if isinstance(item, LoadFailure):
                        summary.failures.append(item)
                    else:
                        docs.append(item)
                docs = _last_per_key(docs)
                changed, existing = self._changed(docs, summary)
                prepared, new_concepts = self._prepare(changed, summary, timings)
                t = time.perf_counter()
                for group in _chunks_of(prepared, self.config.group_size):
                    self._write_group(group, new_concepts, existing, summary)
                timings["write"] += time.perf_counter() - t
                progress.update(len(batch))
                progress.set_postfix(added=summary.added, updated=summary.updated, skipped=summary.skipped, failed=len(summary.failures))
        finally:
            progress.close()
        # The vectors written wait in the search indexes' pending queues; the store rebuilds an
        # index (as a new generation, queries going on) when its queue is large next to it.
        t = time.perf_counter()
        self.store.after_bulk_write(chunks=summary.chunks, concepts=summary.concepts, settings=self.config.index)
        timings["index"] = time.perf_counter() - t
        summary.failed = len(summary.failures)
        summary.timings = {k: round(v, 3) for k, v in timings.items()}
        summary.seconds = round(time.perf_counter() - started, 3)
        return summary

    def _changed(self, docs: list[SourceDocument], summary: IngestSummary) -> tuple[list[SourceDocument], set[str]]:
        """Drop documents whose stored content hash is unchanged; return the rest and the keys that exist."""
        if not docs:
            return [], set()
        rows = self.store.query("document_hashes", {"ids": [document_id(d.key) for d in docs]})[-1]
        stored = {row["id"].id: row["content_hash"] for row in rows}
        changed = []
        for doc in docs:
            if stored.get(doc.key) == doc.content_hash:
                summary.skipped += 1
            else:
                changed.append(doc)
        return changed, set(stored)

    def _prepare(
        self, docs: list[SourceDocument], summary: IngestSummary, timings: dict[str, float]
    ) -> tuple[list[_Prepared], dict[str, dict[str, Any]]]:
        """Chunk, extract and embed a batch; returns the documents to write and the new concept records."""
        t = time.perf_counter()
        pieces = []
        for doc in docs:
            chunks = self.config.chunker.split(doc.text)
            if not chunks:
                summary.failures.append(LoadFailure(source=doc.source, reason="document has no text to index"))
                continue
            pieces.append((doc, chunks))
        timings["chunk"] += time.perf_counter() - t
        if not pieces:
            return [], {}

        t = time.perf_counter()
        texts = [c.content for _, chunks in pieces for c in chunks]
        mentions = iter(self.extractor.extract(texts))
        timings["extract"] += time.perf_counter() - t

        t = time.perf_counter()
        in_context = [self._in_context(doc, c.content) for doc, chunks in pieces for c in chunks]
        vectors = iter(_as_rows(self.embedder.embed_documents(in_context)))
        contexts = iter(in_context)
        timings["embed"] += time.perf_counter() - t

        prepared: list[_Prepared] = []
        for doc, chunks in pieces:
            doc_id = document_id(doc.key)
            doc_concepts = self._metadata_extractor.extract_document(doc)
            item = _Prepared(
                doc=doc,
                record={
                    "id": doc_id,
                    "source": doc.source,
                    "title": doc.title,
                    "content_type": doc.content_type,
                    "content_hash": doc.content_hash,
                    "metadata": wire.with_nulls(doc.metadata),
                    "access": list(doc.access),
                    "chunk_count": len(chunks),
                },
                chunks=[],
                texts=[],
                edges=[],
            )
            for chunk in chunks:
                chunk_id = chunk_record_id(doc.key, doc.content_hash, chunk.index)
                item.chunks.append(
                    {
                        "id": chunk_id,
                        "doc": doc_id,
                        "index": chunk.index,
                        "content": chunk.content,
                        "char_start": chunk.start,
                        "char_end": chunk.end,
                        "access": list(doc.access),
                        "embedding": next(vectors),
                    }
                )
                item.texts.append(
                    {
                        "id": RecordID("chunk_text", chunk_id.id),  # type: ignore[arg-type]  # a str: chunk_record_id
                        "chunk": chunk_id,
                        "doc": doc_id,
                        "access": list(doc.access),
                        "text": next(contexts),
                    }
                )
                for mention in _merge(next(mentions), doc_concepts):
                    item.concepts.setdefault(mention.name, mention)
                    item.edges.append(
                        {"in": chunk_id, "out": concept_id(mention.name), "doc": doc_id, "count": mention.count}
                    )
            prepared.append(item)

        t = time.perf_counter()
        new_concepts = self._embed_new_concepts(prepared)
        timings["embed"] += time.perf_counter() - t
        return prepared, new_concepts

    def _embed_new_concepts(self, prepared: list[_Prepared]) -> dict[str, dict[str, Any]]:
        """Concept records, with embeddings, for the names the store doesn't have yet; each is embedded once."""
        wanted: dict[str, ConceptMention] = {}
        for item in prepared:
            for name, mention in item.concepts.items():
                if name not in self._known_concepts:
                    wanted.setdefault(name, mention)
        if wanted:
            stored = self.store.query("existing_concepts", {"ids": [concept_id(n) for n in wanted]})[-1]
            for rid in stored:
                self._known_concepts.add(rid.id)
                wanted.pop(rid.id, None)
        if not wanted:
            return {}
        names = list(wanted)
        vectors = _as_rows(self.embedder.embed_documents([wanted[n].display for n in names]))
        records = {}
        for name, vector in zip(names, vectors):
            mention = wanted[name]
            records[name] = {
                "id": concept_id(name),
                "name": name,
                "display": mention.display,
                "kind": mention.kind,
                "aliases": sorted({mention.display}),
                "embedding": vector,
            }
        return records

    def _write_group(
        self, group: list[_Prepared], new_concepts: dict[str, dict[str, Any]], existing: set[str], summary: IngestSummary
    ) -> int:
        """Write documents in one transaction; if it fails, retry them one by one to isolate the bad one.
        Returns the number of vectors written."""
        try:
            created = self._write(group, new_concepts)
        except QueryExecutionError as error:
            if len(group) == 1:
                summary.failures.append(LoadFailure(source=group[0].doc.source, reason=f"write failed: {error}"))
                return 0
            return sum(self._write_group([item], new_concepts, existing, summary) for item in group)
        for item in group:
            if item.doc.key in existing:
                summary.updated += 1
            else:
                summary.added += 1
            summary.chunks += len(item.chunks)
            summary.edges += len(item.edges)
        summary.concepts += created
        return created + sum(len(item.chunks) for item in group)

    def _write(self, group: list[_Prepared], new_concepts: dict[str, dict[str, Any]]) -> int:
        """One transaction; returns how many concepts it created."""
        concept_names = sorted({name for item in group for name in item.concepts})
        created = [
            {**new_concepts[n], "df": sum(n in item.concepts for item in group)}
            for n in concept_names
            if n in new_concepts and n not in self._known_concepts
        ]
        self.store.query(
            "write_documents",
            {
                "doc_ids": [item.record["id"] for item in group],
                "documents": [item.record for item in group],
                "concepts": created,
                "concept_ids": [concept_id(n) for n in concept_names],
                "chunks": [c for item in group for c in item.chunks],
                "texts": [t for item in group for t in item.texts],
                "edges": [e for item in group for e in item.edges],
            },
        )
        self._known_concepts.update(c["name"] for c in created)
        return len(created)


def delete_documents(store: SurrealStore, keys: Iterable[str]) -> int:
    """Delete documents by key with their chunks and edges, and the concepts left unmentioned.
    Returns how many of the documents existed."""
    ids = [document_id(k) for k in keys]
    if not ids or read_meta(store) is None:
        return 0
    return int(store.query("delete_documents", {"doc_ids": ids})[-1] or 0)


async def adelete_documents(store: SurrealStore, keys: Iterable[str]) -> int:
    ids = [document_id(k) for k in keys]
    if not ids or not (await store.aquery("store_meta"))[-1]:
        return 0
    return int((await store.aquery("delete_documents", {"doc_ids": ids}))[-1] or 0)


def _merge(chunk_mentions: list[ConceptMention], doc_mentions: list[ConceptMention]) -> list[ConceptMention]:
    """Chunk concepts plus the document's metadata concepts, one entry per name."""
    merged = {m.name: m for m in chunk_mentions}
    for m in doc_mentions:
        merged.setdefault(m.name, m)
    return list(merged.values())


def _as_rows(vectors: np.ndarray) -> list[np.ndarray]:
    """One float32 array per vector: the store packs these in bulk, much faster than lists of floats."""
    return list(np.asarray(vectors, dtype=np.float32))


def _timed(items: Iterable[Any], timings: dict[str, float]) -> Iterator[Any]:
    iterator = iter(items)
    while True:
        t = time.perf_counter()
        try:
            item = next(iterator)
        except StopIteration:
            return
        finally:
            timings["load"] += time.perf_counter() - t
        yield item


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _chunks_of(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _last_per_key(docs: list[SourceDocument]) -> list[SourceDocument]:
    """A key given twice in one batch is one document: the later version wins."""
    by_key = {doc.key: doc for doc in docs}
    return list(by_key.values())


def _texts_as_documents(
    texts: Sequence[str],
    metadatas: Sequence[dict[str, Any]] | None,
    ids: Sequence[str] | None,
    titles: Sequence[str | None] | None,
) -> Iterator[SourceDocument | LoadFailure]:
    for i, text in enumerate(texts):
        try:
            yield from_text(
                text,
                key=ids[i] if ids is not None else None,
                title=titles[i] if titles is not None else None,
                metadata=metadatas[i] if metadatas is not None else None,
                source=f"text[{i}]",
            )
        except (LoaderError, ValueError, TypeError) as error:
            yield LoadFailure(source=f"text[{i}]", reason=str(error))
