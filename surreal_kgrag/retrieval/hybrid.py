"""Hybrid retrieval: chunk vectors, BM25 full text and the concepts the query names, fused."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import partial
from typing import Any, ClassVar

from ..db import SurrealStore
from ..db.sdk import RecordID
from . import documents
from .caches import LRU, ChunkTotals
from .config import HybridConfig, RetrieverConfig
from .fused import FusedRetriever, content_words, hits_of, pool_found
from .fusion import Hit
from .plan import Call, Compute, Plan, Query
from .pool import Pool
from .request import Request
from .results import ANALYZE, RANK, RetrievedDocument

__all__ = ["MAX_QUESTION_CONCEPTS", "HybridRetriever", "content_words"]

#: Most concepts of one question the concept channel walks from (the first it names): each is a
#: walk of up to ``concept_max_chunks`` edges, and a 10,000-character question names hundreds.
MAX_QUESTION_CONCEPTS = 64


class HybridRetriever(FusedRetriever):
    """Chunk vectors, BM25 full text and the concepts the query names, fused into one ranking.

    The concept channel needs a concept extractor for the query (default: the spaCy extractor used
    at ingestion, so a question names concepts exactly as the documents do).
    """

    mode = "hybrid"
    config_class: ClassVar[type[RetrieverConfig]] = HybridConfig
    config: HybridConfig

    def __init__(self, store: SurrealStore, *, extractor: Any = None, **kwargs: Any) -> None:
        super().__init__(store, **kwargs)
        self._extractor = _Extractor(extractor)  # a holder: narrowed copies share the loaded model
        self._query_concepts = LRU()

    def _concepts(self, query: str) -> list[str]:
        mentions = self._extractor.loaded().extract([query])[0]
        # A long question names many concepts, each a walk in hybrid_concepts.surql: the first
        # MAX_QUESTION_CONCEPTS it names are kept (every one of any ordinary question).
        names = list(dict.fromkeys(m.name for m in mentions))[:MAX_QUESTION_CONCEPTS]
        return self._query_concepts.remember(query, sorted(names))

    def forget(self, query: str) -> None:
        super().forget(query)
        self._query_concepts.forget(query)

    def _analyze(self, request: Request) -> Plan[None]:
        cached = self._query_concepts.lookup(request.query)
        if cached is None:
            cached = yield Call(partial(self._concepts, request.query), None, ANALYZE)
        request.concepts = cached

    def _plan(self, request: Request) -> Plan[list[RetrievedDocument]]:
        channels = yield from self.channels(request)
        ranking = yield Compute(partial(self.fuse, channels), RANK)
        return (yield from self._hydrate(request, ranking, channels))

    def channels_for(self, query: str, *, k: int | None = None, filters: Mapping[str, Any] | None = None) -> Plan[dict[str, list[Hit]]]:
        """Each channel's hits for ``query``, before fusion (benchmarks and diagnostics)."""
        request = yield from self.prepare(query, k=k, filters=filters)
        return (yield from self.channels(request))

    def channels(self, request: Request) -> Plan[dict[str, list[Hit]]]:
        """Each channel's hits, best first. The BM25 hits, the concepts' chunks and the documents
        the question names are read first (together, once); the named documents' passages then come
        with the first KNN pool, which grows while the channels together find fewer documents than
        the request wants and the pool came back full."""
        question = yield Compute(partial(self._question, request.query), ANALYZE)

        def concept_query(totals: ChunkTotals) -> tuple[Query, ...]:
            return (self._concept_query(request, totals.weighed),) if request.concepts else ()

        _, pool, (concept_rows, text, named) = yield from self._first_round(request, question, concept_query)
        concepts = yield Compute(partial(hits_of, concept_rows[0] if concept_rows else [], "concept"), RANK)
        yield from self.embedded(request)  # the queries before need no vector: they ran while it was computed
        channels: dict[str, list[Hit]] = {}
        while pool.size is not None:
            out = (yield self._knn_query(request, pool))[-1]
            if not pool.read(out, out["fetched"]):
                continue
            lexical = {"text": text, "concept": concepts}
            channels = yield Compute(partial(_channel_hits, out, lexical, named, pool.passages, self.config.chunks_per_document), RANK)
            pairs = ((hit.doc, hit.chunk) for hits in channels.values() for hit in hits)
            found, keys = pool_found(pairs, self.config.group_by, self.config.chunks_per_document)
            pool.grow(found, out["fetched"], out["lowest"], keys)
        return channels

    def _concept_query(self, request: Request, chunk_total: int) -> Query:
        params = {
            "concept_ids": [RecordID("concept", name) for name in request.concepts],
            "chunk_total": chunk_total,
            "max_chunks": self.config.concept_max_chunks,
            "filtered": bool(request.filter.condition),
            **request.filter.params,
        }
        return Query("hybrid_concepts", params, {"filter": request.filter})

    def _knn_query(self, request: Request, pool: Pool) -> Query:
        assert pool.size is not None
        passages, size = documents.passages(pool.unread, self.config, pool.size)
        params = {
            **passages,
            **pool.params(),
            "embedding": request.vector,
            "threshold": self.config.threshold,
            "filtered": bool(request.filter.condition),
            **request.filter.params,
        }
        return Query("search_hybrid", params, self._knn_placeholders(request, size))


def _channel_hits(
    out: Mapping[str, Any],
    lexical: Mapping[str, list[Hit]],
    named: list[documents.Named],
    passage_rows: list[dict[str, Any]],
    per_doc: int,
) -> dict[str, list[Hit]]:
    """The channels' hits, best first: vector from ``search_hybrid``'s rows, the BM25 and concept
    hits read before it, and the named documents with their passages (when the question names any)."""
    channels = {"vector": hits_of(out["vector"], "vector"), **lexical}
    if named:
        channels["document"] = documents.hits(named, passage_rows, per_doc)
    return channels


class _Extractor:
    """The question's concept extractor, loaded on first use: once, whatever the threads, since
    loading spaCy takes seconds."""

    def __init__(self, spec: Any) -> None:
        self._spec = spec
        self._extractor: Any = None
        self._lock = threading.Lock()

    def loaded(self) -> Any:
        with self._lock:
            if self._extractor is None:
                from ..extract import resolve_extractor

                self._extractor = resolve_extractor(self._spec)
            return self._extractor
