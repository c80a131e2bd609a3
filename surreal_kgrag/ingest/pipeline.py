"""The public ingest API: ``Ingestor`` writes documents into a knowledge-graph store.

A run goes load -> chunk -> extract concepts -> embed -> write as overlapping stages (the driver is
``surreal_kgrag.ingest.driver``). The concepts that earned a vector are embedded as the writes
commit, on a thread of their own (``concepts.py``); after the writes, what they queued last, then the
search indexes are maintained. Each small group of documents is written
in one transaction, so a crash never leaves a document half-written; unchanged documents (same
content hash) are skipped, so running again continues where a run stopped.

A stage that fails stops the stages before it; the batches already past it are still written, then
the error is raised. Ctrl-C (or cancelling ``aingest``) lets the transaction in progress finish,
drops the rest and raises :class:`IngestInterrupted` with the counts of what was written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..db import SurrealStore
from ..embed import Embedder, resolve_embedder
from ..errors import ConfigurationError, LoaderError
from ..extract import ConceptExtractor, MetadataConceptExtractor, resolve_extractor
from ..loaders import from_text, iter_sources
from ..models import IngestSummary, LoadFailure, SourceDocument
from ..retrieval.scope import Scope
from ..schema import ensure_schema
from .config import IngestConfig
from .delete import adelete_documents, delete_documents
from .driver import STAGES, IngestInterrupted, Run, RunParts, run_async

__all__ = ["STAGES", "IngestInterrupted", "Ingestor"]  # STAGES and IngestInterrupted live in .driver

logger = logging.getLogger(__name__)


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
        self._metadata_extractor = MetadataConceptExtractor(self.config.metadata_concepts, self.config.max_metadata_concepts)
        self._schema_ready = False

    # -- public API ------------------------------------------------------------------------------

    def ingest(self, inputs: Iterable[Any] | str | os.PathLike[str], **loader_options: Any) -> IngestSummary:
        """Ingest files, folders, ``SourceDocument``s, LangChain or LlamaIndex documents."""
        return Run(self._parts(), self._sources(inputs, loader_options)).execute()

    def ingest_texts(
        self,
        texts: Sequence[str],
        *,
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        titles: Sequence[str | None] | None = None,
    ) -> IngestSummary:
        """Ingest raw strings; ``ids`` make re-ingestion idempotent (default: a hash of the text)."""
        return Run(self._parts(), _texts_as_documents(texts, metadatas, ids, titles)).execute()

    def delete(self, keys: Iterable[str]) -> int:
        """Delete documents by key with their chunks and edges, ``config.group_chunks`` chunks per
        transaction at most; returns how many existed."""
        return delete_documents(self.store, keys, self.scope, self.config.group_chunks)

    async def aingest(self, inputs: Iterable[Any] | str | os.PathLike[str], **loader_options: Any) -> IngestSummary:
        """Async ``ingest``: the same pipeline, its threads off the event loop. Cancelling the task
        stops it the way Ctrl-C does: the transaction in progress finishes, nothing is half-written."""
        return await run_async(Run(self._parts(), self._sources(inputs, loader_options)))

    async def aingest_texts(
        self,
        texts: Sequence[str],
        *,
        metadatas: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        titles: Sequence[str | None] | None = None,
    ) -> IngestSummary:
        return await run_async(Run(self._parts(), _texts_as_documents(texts, metadatas, ids, titles)))

    async def adelete(self, keys: Iterable[str]) -> int:
        return await adelete_documents(self.store, keys, self.scope, self.config.group_chunks)

    # -- hooks -----------------------------------------------------------------------------------

    def _maintain_indexes(self, *, chunks: int, concepts: int, replaced: int, rebuild: bool = True) -> None:
        """The vectors a run wrote wait in the search indexes' pending queues (and the chunks it
        replaced count for the BM25 index); the store rebuilds an index (as a new generation beside
        the live one, queries going on) only when its queue is large next to it, so a run's cost
        grows with what it adds, not with the store. Without ``rebuild`` the queues are only counted."""
        settings = self.config.index if rebuild else self.config.index.model_copy(update={"auto_rebuild": False})
        report = self.store.after_bulk_write(chunks=chunks, concepts=concepts, replaced=replaced, settings=settings)
        if report.failed:
            logger.warning(
                "search indexes not rebuilt after the ingest (the engine did not finish the build): %s; the live "
                "generations are kept and queries scan the pending rows until `surreal-kgrag optimize` succeeds",
                ", ".join(report.failed),
            )

    # -- helpers ---------------------------------------------------------------------------------

    def _parts(self) -> RunParts:
        return RunParts(
            self.store,
            self.embedder,
            self.extractor,
            self._metadata_extractor,
            self.config,
            self.scope,
            self._ensure_schema,
            self._maintain_indexes,
        )

    def _sources(self, inputs: Iterable[Any] | str | os.PathLike[str], options: dict[str, Any]) -> Iterable[Any]:
        if isinstance(inputs, (str, os.PathLike)):
            inputs = [inputs]
        options.setdefault("part_chars", min(self.config.part_chars, self.config.max_document_chars))
        return iter_sources(inputs, **options)

    def _ensure_schema(self) -> None:
        if not self._schema_ready:
            ensure_schema(
                self.store, dimension=self.embedder.dimension, embedder=self.embedder.name, settings=self.config.index
            )
            self._schema_ready = True


def _texts_as_documents(
    texts: Sequence[str],
    metadatas: Sequence[dict[str, Any]] | None,
    ids: Sequence[str] | None,
    titles: Sequence[str | None] | None,
) -> Iterator[SourceDocument | LoadFailure]:
    """The texts as documents; the arguments are checked first, before anything is read or written."""
    if isinstance(texts, (str, bytes)):
        raise ConfigurationError("texts is one string: pass a list of texts (ingest_texts([text]))")
    texts = list(texts)
    for name, given in (("metadatas", metadatas), ("ids", ids), ("titles", titles)):
        if given is None:
            continue
        if isinstance(given, (str, bytes)) or len(given) != len(texts):
            count = "a string" if isinstance(given, (str, bytes)) else f"{len(given)} items"
            raise ConfigurationError(f"{name} has {count} for {len(texts)} texts: give one per text, in the same order")
    return _documents_of(texts, metadatas, ids, titles)


def _documents_of(
    texts: list[str],
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
