"""The stage driver under ``Ingestor``: one ingest run as overlapping stages, a thread each.

load -> chunk -> extract concepts -> embed -> write hand batches to each other through bounded
queues (``stages.StageLine``), so spaCy works on one batch while the embedder works on the previous
one and the database writes the one before that, and memory stays flat whatever the corpus size. A
long run embeds its documents in a child process (``embed.process``): spaCy's Python and the
engine's queries hold the GIL, which the model's forward pass needs between operations. The
concepts the writes queue for a vector are embedded meanwhile on one more thread
(``concepts.VectorWorker``, the ``vectors`` stage); what the last writes queued is embedded after
them, then the search indexes are maintained. The load stage drops what ``changes`` finds
unstorable, claimed by another source or unchanged; the stored parts a file no longer has are
deleted once the writes are done. Here too: the progress bar and the stages' busy times, and
cancellation (Ctrl-C or a cancelled ``aingest`` lets the transaction in progress finish and raises
:class:`IngestInterrupted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tqdm.auto import tqdm

from ..db import SurrealStore
from ..embed import Embedder
from ..embed.process import ProcessEmbedding, in_child_process
from ..errors import QueryExecutionError
from ..extract import ConceptExtractor, MetadataConceptExtractor
from ..models import IngestSummary, LLMIngestStats, LoadFailure, SourceDocument
from ..retrieval.scope import Scope
from ..sections import split_document
from .changes import ChangeDetector, check_document, last_per_key
from .concepts import VectorWorker, embed_many
from .config import IngestConfig
from .delete import delete_records, stale_parts
from .records import DocumentWork, PreparedDocument, in_context, prepare
from .relations import GraphExtractor, extract_graphs
from .scoped import labelled
from .slices import finish_pending_writes
from .stages import StageLine
from .writer import Writer

logger = logging.getLogger(__name__)

STAGES = ("load", "chunk", "extract", "embed", "write", "vectors", "index")


@dataclass(frozen=True)
class RunParts:
    """What a run works with: the ingestor's store, models, settings and scope, and its two hooks."""

    store: SurrealStore
    embedder: Embedder
    extractor: ConceptExtractor
    metadata: MetadataConceptExtractor
    config: IngestConfig
    scope: Scope
    ensure_schema: Callable[[], None]
    maintain_indexes: Callable[..., None]


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
class Batch:
    works: list[DocumentWork] = field(default_factory=list)
    failures: list[LoadFailure] = field(default_factory=list)
    skipped: int = 0
    prepared: list[PreparedDocument] = field(default_factory=list)
    stale: list[tuple[Any, str]] = field(default_factory=list)  # documents the batch's files no longer produce, with their file
    echoes: list[SourceDocument] = field(default_factory=list)  # sent to be written earlier in this run, same text

    @property
    def chunks(self) -> int:
        return sum(len(w.chunks) for w in self.works)


class Run:
    """One ingest run: a thread per stage, bounded queues between them."""

    def __init__(self, parts: RunParts, sources: Iterable[SourceDocument | LoadFailure | Any]) -> None:
        self.store = parts.store
        self.embedder = self.given_embedder = parts.embedder
        self.extractor = parts.extractor
        self.metadata_extractor = parts.metadata
        self.config = parts.config
        self.ensure_schema = parts.ensure_schema
        self.maintain_indexes = parts.maintain_indexes
        self.scope = parts.scope
        self.sources = sources
        self.summary = IngestSummary()
        self.timings = dict.fromkeys(STAGES, 0.0)
        self.busy: set[str] = set()
        self.changes = ChangeDetector(self.store, self.scope)
        # Stored documents the run's files no longer produce, by record id, with their file: removed
        # once every batch is written (a file's new documents can span several batches).
        self.stale: dict[str, tuple[Any, str]] = {}
        self.line = StageLine(self.config.queue_batches)
        self.abort = self.line.abort
        self.progress: Any = None
        self.started = 0.0
        # Counted by the extract stage; the writer counts the relations it wrote.
        self.llm = LLMIngestStats() if isinstance(parts.extractor, GraphExtractor) else None
        self.writer: Writer | None = None
        self.vectors: VectorWorker | None = None

    # -- driver ----------------------------------------------------------------------------------

    def execute(self) -> IngestSummary:
        self.started = time.perf_counter()
        self.ensure_schema()
        finish_pending_writes(self.store, self.config.group_chunks, scope=self.scope.compile())
        show = self.config.show_progress
        self.progress = tqdm(
            desc="ingest", unit="doc", file=sys.stderr, disable=(not sys.stderr.isatty()) if show is None else not show
        )
        self.writer = writer = Writer(
            self.store,
            self.summary,
            group_size=self.config.group_size,
            group_chunks=self.config.group_chunks,
            vector_min_chunks=self.config.concept_vector_min_chunks,
            scope=self.scope.compile(),
            on_written=self._written,
        )
        self.embedder = in_child_process(self.embedder, self.config.embedding_process)
        self.vectors = VectorWorker(self.store, self.embedder, self.abort.is_set, lambda: self._timed("vectors"))
        indexed = False
        try:
            with self.vectors.running() as vectors:
                self.line.run(
                    self._load, [("extract", self._extract), ("embed", self._embed)], lambda batch: self._write(batch, writer, vectors)
                )
                if not self.abort.is_set():
                    with self._timed("write"), vectors.write_lock:
                        self._remove_stale()
                    self.progress.set_postfix_str("vectors", refresh=True)
                    vectors.finish()  # what the last writes queued
            if self.abort.is_set():  # aingest cancelled (the worker has stopped: its counts are final)
                raise IngestInterrupted(self._finish())
            self._stage_index()
            indexed = True
        except KeyboardInterrupt as interrupt:
            if isinstance(interrupt, IngestInterrupted):
                raise
            raise IngestInterrupted(self._finish()) from None  # the transaction in progress has finished
        finally:
            if not indexed:
                self._count_pending()
            self.progress.close()
            if isinstance(self.embedder, ProcessEmbedding) and self.embedder is not self.given_embedder:
                self.embedder.close()  # the child this run started; a caller's own (in_own_process) is the caller's to end
        return self._finish()

    def _finish(self) -> IngestSummary:
        if self.vectors is not None:
            self.summary.concept_vectors = self.vectors.embedded
        self.summary.failed = len(self.summary.failures)
        self.summary.timings = {k: round(v, 3) for k, v in self.timings.items()}
        self.summary.seconds = round(time.perf_counter() - self.started, 3)
        if self.llm is not None:
            written = self.writer.relations_written if self.writer is not None else 0
            self.summary.llm = self.llm.model_copy(update={"relations": written})
        return self.summary

    def _stage_index(self) -> None:
        self.progress.set_postfix_str("index", refresh=True)
        with self._timed("index"):
            self.maintain_indexes(
                chunks=self.summary.chunks, concepts=self.summary.concept_vectors, replaced=self.summary.replaced_chunks
            )

    def _count_pending(self) -> None:
        """A run that stopped early (interrupted, cancelled, failed) still tells the store what it
        wrote, so that ``optimize`` and the next run's rule see the rows waiting in the indexes'
        queues; it starts no rebuild (the caller is on its way out)."""
        concepts = self.vectors.embedded if self.vectors is not None else 0
        if not self.summary.chunks and not concepts:
            return
        try:
            self.maintain_indexes(chunks=self.summary.chunks, concepts=concepts, replaced=self.summary.replaced_chunks, rebuild=False)
        except Exception as error:  # the run's own error is the one to raise
            logger.warning("the search indexes' pending counts were not recorded (%s): run `surreal-kgrag optimize`", error)

    def _write(self, batch: Batch, writer: Writer, vectors: VectorWorker) -> None:
        self.summary.failures.extend(batch.failures)
        self.summary.skipped += batch.skipped
        self._written(len(batch.failures) + batch.skipped, 0)
        self.stale.update((str(rid), (rid, source)) for rid, source in batch.stale)
        with self._timed("write"), vectors.write_lock:
            writer.write(batch.prepared, self.abort.is_set)
        vectors.poke()
        self._settle(batch.echoes, writer)

    def _settle(self, echoes: list[SourceDocument], writer: Writer) -> None:
        """An echo is skipped once its first copy was written; when that write failed, so does the
        echo (it is the same text), and the run reports both rather than calling one unchanged."""
        for echo in echoes:
            reason = writer.failed.get(echo.key)
            if reason is None:
                self.summary.skipped += 1
            else:
                self.summary.failures.append(
                    LoadFailure(source=echo.source, reason=f"not written: its text was given earlier in this ingest and {reason}")
                )
        self._written(len(echoes), 0)

    def _remove_stale(self) -> None:
        """Delete what the run's files no longer produce, once all their new documents are written: a
        file any of whose new documents failed keeps its old ones, beside the new ones that were
        written (nothing is lost; the next run replaces them)."""
        failed = {failure.source for failure in self.summary.failures}
        stale = list(self.stale.values())
        for source in dict.fromkeys(source for _, source in stale if source not in failed):
            try:
                delete_records(self.store, [rid for rid, of in stale if of == source], self.config.group_chunks, self.scope)
            except (QueryExecutionError, ValueError) as error:
                self.summary.failures.append(LoadFailure(source=source, reason=f"its old parts could not be removed: {error}"))

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

    def _load(self) -> Iterator[Batch]:
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
                problem = item if isinstance(item, LoadFailure) else check_document(item, cfg.max_document_chars)
                if problem is None and isinstance(item, SourceDocument):
                    item = labelled(item, self.scope)
                    problem = item if isinstance(item, LoadFailure) else None
                if problem is None and isinstance(item, SourceDocument):
                    problem = self.changes.claim(item)
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

    def _chunked(self, docs: list[SourceDocument], failures: list[LoadFailure]) -> Iterator[Batch]:
        docs = last_per_key(docs)
        with self._timed("load"):
            changes = self.changes.changed(docs)
            stale = stale_parts(self.store, docs, self.scope)
        batch = Batch(failures=list(failures), skipped=changes.unchanged, stale=stale, echoes=changes.echoes)
        stored_chunks = changes.counts
        for doc in changes.changed:
            with self._timed("chunk"):
                chunks = split_document(self.config.chunker, doc)
            if not chunks:
                batch.failures.append(LoadFailure(source=doc.source, reason="document has no text to index"))
                continue
            if batch.works and batch.chunks + len(chunks) > self.config.batch_chunks:
                yield batch
                batch = Batch()
            batch.works.append(DocumentWork(doc, chunks, doc.key in stored_chunks, replaced_chunks=stored_chunks.get(doc.key, 0)))
            self.changes.queue(doc, len(chunks))
        yield batch

    def _extract(self, batch: Batch) -> None:
        if not batch.works:
            return
        with self._timed("extract"):
            texts = [c.text for w in batch.works for c in w.chunks]
            found = self._in_slices(partial(extract_graphs, self.extractor, self.llm), texts)
            if found is None:
                return
            graphs = iter(found)
            for work in batch.works:
                chunks = [next(graphs) for _ in work.chunks]
                work.mentions = [graph.mentions for graph in chunks]
                work.relations = [graph.relations for graph in chunks]

    def _embed(self, batch: Batch) -> None:
        if not batch.works:
            return
        with self._timed("embed"):
            for work in batch.works:
                work.contexts = [in_context(work.doc, c.text, self.config.title_in_context) for c in work.chunks]
            contexts = [text for work in batch.works for text in work.contexts]
            embedded = self._in_slices(lambda texts: embed_many(self.embedder, texts, len(texts)), contexts)
            if embedded is None:
                return
            vectors = iter(embedded)
            for work in batch.works:
                work.vectors = [next(vectors) for _ in work.chunks]
            metadata = self.metadata_extractor
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


async def run_async(run: Run) -> IngestSummary:
    future = asyncio.get_running_loop().run_in_executor(None, run.execute)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        run.abort.set()
        with contextlib.suppress(IngestInterrupted):
            await future  # the transaction in progress finishes
        raise
