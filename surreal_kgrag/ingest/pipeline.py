"""The ingest pipeline: load -> chunk -> extract concepts -> embed -> write, as overlapping stages.

Each stage runs in its own thread and hands batches to the next through a bounded queue, so spaCy
works on one batch while the embedder works on the previous one and the database writes the one
before that (the models and the engine release the GIL), and memory stays flat whatever the corpus
size. After the writes, the concepts that earned a vector are embedded (``concepts.py``), then the
search indexes are maintained. Each small group of documents is written in one transaction, so a
crash never leaves a document half-written; unchanged documents (same content hash) are skipped, so
running again continues where a run stopped.

A stage that fails stops the stages before it; the batches already past it are still written, then
the error is raised. Ctrl-C (or cancelling ``aingest``) lets the transaction in progress finish,
drops the rest and raises :class:`IngestInterrupted` with the counts of what was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tqdm.auto import tqdm

from ..db import SurrealStore
from ..embed import Embedder, resolve_embedder
from ..errors import LoaderError
from ..extract import ConceptExtractor, MetadataConceptExtractor, resolve_extractor
from ..ids import document_id
from ..loaders import find_unstorable, from_text, iter_sources
from ..models import IngestSummary, LLMIngestStats, LoadFailure, SourceDocument
from ..retrieval.scope import Scope
from ..schema import ensure_schema
from ..sections import split_document
from .concepts import embed_many, embed_queued_concepts
from .config import IngestConfig
from .delete import adelete_documents, delete_documents, delete_records, stale_parts
from .records import DocumentWork, PreparedDocument, in_context, prepare
from .relations import GraphExtractor, extract_graphs
from .scoped import labelled
from .stages import StageLine
from .writer import Writer

STAGES = ("load", "chunk", "extract", "embed", "write", "vectors", "index")


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C during an ingest: what was written is complete and counted in ``summary``; running
    the same ingest again continues (unchanged documents are skipped)."""

    def __init__(self, summary: IngestSummary) -> None:
        super().__init__(
            f"ingest interrupted: {summary.added} added, {summary.updated} updated, {summary.skipped} skipped, "
            f"{summary.failed} failed were written completely; run it again to continue"
        )
        self.summary = summary


@dataclass
class _Batch:
    works: list[DocumentWork] = field(default_factory=list)
    failures: list[LoadFailure] = field(default_factory=list)
    skipped: int = 0
    prepared: list[PreparedDocument] = field(default_factory=list)
    stale: list[Any] = field(default_factory=list)  # documents the batch's files no longer produce

    @property
    def chunks(self) -> int:
        return sum(len(w.chunks) for w in self.works)


class Ingestor:
    """Writes documents into a knowledge-graph store.

    ``scope`` makes it a scoped writer (:mod:`.scoped`): documents go in under the scope's labels,
    and only documents the scope can read are replaced or deleted.

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
        scope: Scope | None = None,
    ) -> None:
        self.store = store
        # A record user's writes are its labels' too (the database refuses them anyway: readers cannot write).
        self.scope = Scope.of(scope).narrow(Scope(record_user=bool(store.config.access)))
        self.embedder = resolve_embedder(embedder)
        self.extractor = resolve_extractor(extractor)
        self.config = config or IngestConfig()
        self._metadata_extractor = MetadataConceptExtractor(self.config.metadata_concepts)
        self._schema_ready = False

    # -- public API ------------------------------------------------------------------------------

    def ingest(self, inputs: Iterable[Any] | str | os.PathLike[str], **loader_options: Any) -> IngestSummary:
        """Ingest files, folders, ``SourceDocument``s, LangChain or LlamaIndex documents."""
        return _Run(self, self._sources(inputs, loader_options)).execute()

    def ingest_texts(
        self,
        texts: Sequence[str],
        *,
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        titles: Sequence[str | None] | None = None,
    ) -> IngestSummary:
        """Ingest raw strings; ``ids`` make re-ingestion idempotent (default: a hash of the text)."""
        return _Run(self, _texts_as_documents(texts, metadatas, ids, titles)).execute()

    def delete(self, keys: Iterable[str]) -> int:
        """Delete documents by key with their chunks and edges; returns how many existed."""
        return delete_documents(self.store, keys, self.scope)

    async def aingest(self, inputs: Iterable[Any] | str | os.PathLike[str], **loader_options: Any) -> IngestSummary:
        """Async ``ingest``: the same pipeline, its threads off the event loop. Cancelling the task
        stops it the way Ctrl-C does: the transaction in progress finishes, nothing is half-written."""
        return await _run_async(_Run(self, self._sources(inputs, loader_options)))

    async def aingest_texts(
        self,
        texts: Sequence[str],
        *,
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        titles: Sequence[str | None] | None = None,
    ) -> IngestSummary:
        return await _run_async(_Run(self, _texts_as_documents(texts, metadatas, ids, titles)))

    async def adelete(self, keys: Iterable[str]) -> int:
        return await adelete_documents(self.store, keys, self.scope)

    # -- hooks -----------------------------------------------------------------------------------

    def _maintain_indexes(self, *, chunks: int, concepts: int) -> None:
        """The vectors a run wrote wait in the search indexes' pending queues; the store rebuilds an
        index (as a new generation beside the live one, queries going on) only when its queue is
        large next to it, so a run's cost grows with what it adds, not with the store."""
        self.store.after_bulk_write(chunks=chunks, concepts=concepts, settings=self.config.index)

    # -- helpers ---------------------------------------------------------------------------------

    def _sources(self, inputs: Iterable[Any] | str | os.PathLike[str], options: dict[str, Any]) -> Iterable[Any]:
        if isinstance(inputs, (str, os.PathLike)):
            inputs = [inputs]
        options.setdefault("part_chars", self.config.max_document_chars)
        return iter_sources(inputs, **options)

    def _ensure_schema(self) -> None:
        if not self._schema_ready:
            ensure_schema(
                self.store, dimension=self.embedder.dimension, embedder=self.embedder.name, settings=self.config.index
            )
            self._schema_ready = True


async def _run_async(run: _Run) -> IngestSummary:
    future = asyncio.get_running_loop().run_in_executor(None, run.execute)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        run.abort.set()
        with contextlib.suppress(IngestInterrupted):
            await future  # the transaction in progress finishes
        raise


class _Run:
    """One ingest run: a thread per stage, bounded queues between them."""

    def __init__(self, ingestor: Ingestor, sources: Iterable[SourceDocument | LoadFailure | Any]) -> None:
        self.ingestor = ingestor
        self.config = ingestor.config
        self.sources = sources
        self.summary = IngestSummary()
        self.timings = dict.fromkeys(STAGES, 0.0)
        self.busy: set[str] = set()
        self.line = StageLine(self.config.queue_batches)
        self.abort = self.line.abort
        self.progress: Any = None
        self.started = 0.0
        # Counted by the extract stage; the writer counts the relations it wrote.
        self.llm = LLMIngestStats() if isinstance(ingestor.extractor, GraphExtractor) else None
        self.writer: Writer | None = None

    # -- driver ----------------------------------------------------------------------------------

    def execute(self) -> IngestSummary:
        self.started = time.perf_counter()
        self.ingestor._ensure_schema()
        show = self.config.show_progress
        self.progress = tqdm(
            desc="ingest", unit="doc", file=sys.stderr, disable=(not sys.stderr.isatty()) if show is None else not show
        )
        self.writer = writer = Writer(
            self.ingestor.store,
            self.summary,
            group_size=self.config.group_size,
            group_chunks=self.config.group_chunks,
            vector_min_chunks=self.config.concept_vector_min_chunks,
            scope=self.ingestor.scope.compile(),
            on_written=self._written,
        )
        try:
            self.line.run(self._load, [("extract", self._extract), ("embed", self._embed)], lambda batch: self._write(batch, writer))
            if self.abort.is_set():  # aingest cancelled
                raise IngestInterrupted(self._finish())
            self._stage_vectors()
            self._stage_index()
        except KeyboardInterrupt as interrupt:
            if isinstance(interrupt, IngestInterrupted):
                raise
            raise IngestInterrupted(self._finish()) from None  # the transaction in progress has finished
        finally:
            self.progress.close()
        return self._finish()

    def _finish(self) -> IngestSummary:
        self.summary.failed = len(self.summary.failures)
        self.summary.timings = {k: round(v, 3) for k, v in self.timings.items()}
        self.summary.seconds = round(time.perf_counter() - self.started, 3)
        if self.llm is not None:
            written = self.writer.relations_written if self.writer is not None else 0
            self.summary.llm = self.llm.model_copy(update={"relations": written})
        return self.summary

    def _stage_vectors(self) -> None:
        self.progress.set_postfix_str("vectors", refresh=True)
        with self._timed("vectors"):
            self.summary.concept_vectors = embed_queued_concepts(self.ingestor.store, self.ingestor.embedder, self.abort.is_set)
        if self.abort.is_set():
            raise IngestInterrupted(self._finish())

    def _stage_index(self) -> None:
        self.progress.set_postfix_str("index", refresh=True)
        with self._timed("index"):
            self.ingestor._maintain_indexes(chunks=self.summary.chunks, concepts=self.summary.concept_vectors)

    def _write(self, batch: _Batch, writer: Writer) -> None:
        self.summary.failures.extend(batch.failures)
        self.summary.skipped += batch.skipped
        self._written(len(batch.failures) + batch.skipped, 0)
        with self._timed("write"):
            delete_records(self.ingestor.store, batch.stale)
            writer.write(batch.prepared, self.abort.is_set)

    @contextlib.contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        self.busy.add(stage)
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] += time.perf_counter() - t
            self.busy.discard(stage)

    def _written(self, documents: int, chunks: int) -> None:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        self.progress.update(documents)
        busy = "+".join(s for s in STAGES if s in self.busy) or "-"
        self.progress.set_postfix_str(f"{self.summary.chunks / elapsed:.1f} chunks/s, busy: {busy}", refresh=False)

    # -- stages ----------------------------------------------------------------------------------

    def _load(self) -> Iterator[_Batch]:
        """Read sources; drop unchanged documents; chunk the rest into batches bounded by chunk count."""
        cfg = self.config
        docs: list[SourceDocument] = []
        failures: list[LoadFailure] = []
        chars = 0
        iterator = iter(self.sources)
        while not self.abort.is_set():
            with self._timed("load"):
                item = next(iterator, None)
            if item is not None:
                problem = item if isinstance(item, LoadFailure) else _check(item, cfg.max_document_chars)
                if problem is None and isinstance(item, SourceDocument):
                    item = labelled(item, self.ingestor.scope)
                    problem = item if isinstance(item, LoadFailure) else None
                if problem is not None or not isinstance(item, SourceDocument):
                    failures.append(problem or LoadFailure(source="?", reason="not a document"))
                    continue
                docs.append(item)
                chars += len(item.text)
                # about 1,000 characters of text per chunk: enough documents to fill a batch
                if len(docs) < cfg.batch_size and chars < cfg.batch_chunks * 1_000:
                    continue
            if docs or failures:
                yield from self._chunked(docs, failures)
            docs, failures, chars = [], [], 0
            if item is None:
                return

    def _chunked(self, docs: list[SourceDocument], failures: list[LoadFailure]) -> Iterator[_Batch]:
        docs = _last_per_key(docs)
        with self._timed("load"):
            changed, skipped, existing = self._changed(docs)
            stale = stale_parts(self.ingestor.store, docs, self.ingestor.scope)
        batch = _Batch(failures=list(failures), skipped=skipped, stale=stale)
        for doc in changed:
            with self._timed("chunk"):
                chunks = split_document(self.config.chunker, doc)
            if not chunks:
                batch.failures.append(LoadFailure(source=doc.source, reason="document has no text to index"))
                continue
            if batch.works and batch.chunks + len(chunks) > self.config.batch_chunks:
                yield batch
                batch = _Batch()
            batch.works.append(DocumentWork(doc, chunks, doc.key in existing))
        yield batch

    def _changed(self, docs: list[SourceDocument]) -> tuple[list[SourceDocument], int, set[str]]:
        """Documents whose stored content hash differs, how many are unchanged, the keys stored."""
        if not docs:
            return [], 0, set()
        rows = self.ingestor.store.query("document_hashes", {"ids": [document_id(d.key) for d in docs]})[-1]
        stored = {row["id"].id: row["content_hash"] for row in rows}
        changed = [doc for doc in docs if stored.get(doc.key) != doc.content_hash]
        return changed, len(docs) - len(changed), set(stored)

    def _extract(self, batch: _Batch) -> None:
        if not batch.works:
            return
        with self._timed("extract"):
            texts = [c.text for w in batch.works for c in w.chunks]
            found = self._in_slices(partial(extract_graphs, self.ingestor.extractor, self.llm), texts)
            if found is None:
                return
            graphs = iter(found)
            for work in batch.works:
                chunks = [next(graphs) for _ in work.chunks]
                work.mentions = [graph.mentions for graph in chunks]
                work.relations = [graph.relations for graph in chunks]

    def _embed(self, batch: _Batch) -> None:
        if not batch.works:
            return
        ingestor = self.ingestor
        with self._timed("embed"):
            for work in batch.works:
                work.contexts = [in_context(work.doc, c.text, self.config.title_in_context) for c in work.chunks]
            contexts = [text for work in batch.works for text in work.contexts]
            embedded = self._in_slices(lambda texts: embed_many(ingestor.embedder, texts, len(texts)), contexts)
            if embedded is None:
                return
            vectors = iter(embedded)
            for work in batch.works:
                work.vectors = [next(vectors) for _ in work.chunks]
            metadata = ingestor._metadata_extractor
            batch.prepared = [
                prepare(work, metadata.extract_document(work.doc), keep_text=self.config.keep_text) for work in batch.works
            ]
            batch.works = []  # the prepared records hold everything from here on

    def _in_slices(self, model: Callable[[list[str]], Any], texts: list[str]) -> list[Any] | None:
        """``model`` over ``texts``, ``batch_chunks`` at a time (a long document is one batch of
        many chunks); None when the run is aborted meanwhile, so Ctrl-C never waits long."""
        size = self.config.batch_chunks
        out: list[Any] = []
        for start in range(0, len(texts), size):
            if self.abort.is_set():
                return None
            out.extend(model(texts[start : start + size]))
        return out


def _check(doc: SourceDocument | Any, max_chars: int) -> LoadFailure | None:
    """A failure for a document that cannot be written, found before any model work."""
    if not isinstance(doc, SourceDocument):
        return LoadFailure(source=repr(doc)[:80], reason=f"not a document: {type(doc).__name__}")
    if len(doc.text) > max_chars:
        return LoadFailure(
            source=doc.source,
            reason=f"document has {len(doc.text):,} characters, more than max_document_chars={max_chars:,} "
            "(IngestConfig); split it, or raise the limit (one document is written in one transaction)",
        )
    problem = find_unstorable(
        {"key": doc.key, "source": doc.source, "title": doc.title, "text": doc.text, "metadata": doc.metadata, "access": doc.access}
    )
    return None if problem is None else LoadFailure(source=doc.source, reason=problem)


def _last_per_key(docs: list[SourceDocument]) -> list[SourceDocument]:
    """A key given twice in one batch is one document: the later version wins."""
    return list({doc.key: doc for doc in docs}.values())


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
