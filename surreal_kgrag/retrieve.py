"""Retrievers: embed the query, run parameterised SurrealQL from ``surql/``, shape typed results.

Every retriever follows one template: ``search()`` -> ``_plan()`` (the queries, written once as a
generator so the sync and async paths share it) -> ranked ``RetrievedDocument``s -> optional reranker
-> exactly ``k`` results.

- ``ChunkRetriever``: KNN over chunk embeddings, grouped by document (``search_chunks.surql``).
- ``ConceptRetriever``: KNN over concept embeddings, walked to the chunks that mention them.
- ``HybridRetriever``: chunk vectors + BM25 on chunk content + the concepts named in the query,
  fused by reciprocal rank (or weighted scores).
- ``GraphRetriever``: hybrid, then expands from the best documents along ``MENTIONS_CONCEPT`` to
  chunks of other documents that share rare concepts, for answers that span documents.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict, defaultdict
from collections.abc import Collection, Generator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from surrealdb import RecordID

from .embed import Embedder, resolve_embedder
from .filters import CompiledFilter, access_filter, combine, compile_filter
from .ids import chunk_document_key
from .store import SurrealStore, checked_int

Mode = Literal["chunk", "concept", "hybrid", "graph"]
_RECOUNT_SECONDS = 60.0
Channel = Literal["vector", "text", "concept", "graph"]


class ConceptMatch(BaseModel):
    """A concept that led to a result, with its score (similarity to the query, or its weight when
    the query named it)."""

    id: str
    name: str
    score: float


class ChunkHit(BaseModel):
    id: str
    index: int
    content: str
    score: float
    concepts: list[ConceptMatch] = Field(default_factory=list, description="concepts that led to this chunk")


class ProvenancePath(BaseModel):
    """One reason a document came back: query -> [concept ->] chunk -> document."""

    channel: Channel
    score: float = Field(description="the channel's score for this path")
    document_id: str
    chunk_id: str
    concept: ConceptMatch | None = None
    via_chunk_id: str | None = Field(None, description="graph paths: the seed chunk the walk started from")

    def describe(self) -> str:
        hop = f"chunk {self.via_chunk_id} -> " if self.via_chunk_id else ""
        concept = f"concept {self.concept.name!r} ({self.concept.score:.3f}) -> " if self.concept else ""
        return f"query -[{self.channel} {self.score:.3f}]-> {hop}{concept}chunk {self.chunk_id} -> document {self.document_id}"


class RetrievedDocument(BaseModel):
    id: str = Field(description="the document key (corpus id or file path)")
    title: str | None
    source: str
    metadata: dict[str, Any]
    score: float
    chunks: list[ChunkHit]
    provenance: list[ProvenancePath] = Field(default_factory=list)

    @property
    def concepts(self) -> list[ConceptMatch]:
        seen: dict[str, ConceptMatch] = {}
        for chunk in self.chunks:
            for concept in chunk.concepts:
                if concept.id not in seen or concept.score > seen[concept.id].score:
                    seen[concept.id] = concept
        return sorted(seen.values(), key=lambda c: -c.score)


class RetrievalResult(BaseModel):
    query: str
    mode: str
    documents: list[RetrievedDocument]
    embed_ms: float = Field(description="time spent embedding the query (0 when cached)")
    analyze_ms: float = Field(0.0, description="time spent finding the concepts the query names (0 when cached)")
    search_ms: float = Field(description="time spent in the database")
    rerank_ms: float = 0.0


class RetrieverConfig(BaseModel):
    """Settings shared by every retriever; each documents its default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(5, ge=1, le=1000, description="results returned (documents, or chunks with group_by='chunk')")
    candidates: int | None = Field(
        None, ge=1, le=10_000,
        description="vectors fetched by KNN before grouping (default: 20 chunks, 10 concepts, 40 for hybrid and graph)",
    )
    ef: int = Field(80, ge=1, le=10_000, description="HNSW search breadth")
    threshold: float = Field(0.0, ge=-1.0, le=1.0, description="minimum similarity of a chunk or concept")
    group_by: Literal["document", "chunk"] = "document"
    aggregate: Literal["max", "mean", "count"] = Field("max", description="how chunk scores make a document score")
    filters: dict[str, Any] | None = Field(None, description="default filter, see surreal_kgrag.filters")
    access: list[str] | None = Field(None, description="only documents carrying one of these access labels")
    rerank_pool: int = Field(20, ge=1, le=1000, description="documents handed to the reranker before cutting to k")


_DEFAULT_WEIGHTS: dict[Channel, float] = {"vector": 1.0, "text": 1.0, "concept": 1.0, "graph": 0.2}


class HybridConfig(RetrieverConfig):
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = Field(5, ge=1, description="rank constant of reciprocal rank fusion (small: trust the top ranks)")
    weights: dict[Channel, float] = Field(default_factory=lambda: dict(_DEFAULT_WEIGHTS))
    fulltext: bool = Field(True, description="use the BM25 channel")
    text_max_df: float = Field(
        0.02, gt=0.0, le=1.0,
        description="BM25 leaves out query words found in more than this share of the chunks (1.0 keeps all)",
    )
    text_max_matches: int = Field(
        600, ge=1,
        description="BM25 takes words rarest first until their chunk counts add up to this: bounds its cost",
    )
    chunks_per_document: int = Field(3, ge=1, description="chunks kept per fused document")


class GraphConfig(HybridConfig):
    fulltext: bool = Field(False, description="the graph hop stands in for the BM25 channel, to keep the two-step query fast")
    seeds: int = Field(3, ge=1, le=50, description="best hybrid documents the expansion starts from")
    max_df: int = Field(5, ge=2, description="skip bridge concepts mentioned by more chunks than this")
    max_paths: int = Field(200, ge=1, le=10_000, description="paths scored per expansion")


class _Request(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    query: str
    k: int
    fetch: int
    filter: CompiledFilter
    embedding: list[float]
    concepts: list[str] = Field(default_factory=list)

    @property
    def vector(self) -> np.ndarray:
        """The embedding as float32: the embedded engine's encoder packs it in one step."""
        return np.asarray(self.embedding, dtype=np.float32)


# A plan yields a (query name, params, placeholders) step and receives its results, or a list of
# steps, run concurrently, and receives a list of results.
Step = tuple[str, dict[str, Any], dict[str, Any]]
T = TypeVar("T")
Plan = Generator[Step | list[Step], Any, list[RetrievedDocument]]


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - start


class _LRU(OrderedDict[str, Any]):
    def __init__(self, size: int = 1024) -> None:
        super().__init__()
        self.size = size

    def lookup(self, key: str) -> Any:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def remember(self, key: str, value: Any) -> Any:
        self[key] = value
        if len(self) > self.size:
            self.popitem(last=False)
        return value


class BaseRetriever:
    mode: ClassVar[str]
    config_class: ClassVar[type[RetrieverConfig]] = RetrieverConfig
    # KNN pool when the config names none: enough to fill k documents, and each vector fetched costs
    # about 0.2 ms on the embedded engine, more than the HNSW search itself.
    default_candidates: ClassVar[int] = 40

    def __init__(
        self,
        store: SurrealStore,
        *,
        embedder: Embedder | Any = None,
        config: RetrieverConfig | None = None,
        reranker: Any = None,
        **options: Any,
    ) -> None:
        self.store = store
        self.embedder = resolve_embedder(embedder)
        self.config = config or self.config_class(**options)
        if not isinstance(self.config, self.config_class):
            raise TypeError(f"{type(self).__name__} takes a {self.config_class.__name__}, got {type(self.config).__name__}")
        self.reranker = reranker
        self._embeddings = _LRU()
        compile_filter(self.config.filters)  # fail at construction on a bad default filter

    def __repr__(self) -> str:
        return f"{type(self).__name__}(store={self.store!r}, k={self.config.k})"

    # -- public API ------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        embedding: list[float] | None = None,
    ) -> RetrievalResult:
        """The ``k`` best documents for ``query`` (``filters`` replaces the configured default)."""
        timings: dict[str, float] = {}
        request = self._request(query, k, filters, embedding, timings)
        with _timed(timings, "search"):
            documents = self._drive(self._plan(request))
        with _timed(timings, "rerank"):
            if self.reranker is not None and documents:
                documents = self.reranker.rerank(query, documents, k=request.k, query_embedding=request.embedding)
        return self._result(request, documents, timings)

    async def asearch(
        self,
        query: str,
        *,
        k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        embedding: list[float] | None = None,
    ) -> RetrievalResult:
        """Async ``search``: the same plan, awaited on the store's async connection."""
        timings: dict[str, float] = {}
        request = await self._arequest(query, k, filters, embedding, timings)
        with _timed(timings, "search"):
            documents = await self._adrive(self._plan(request))
        with _timed(timings, "rerank"):
            if self.reranker is not None and documents:
                documents = await self.reranker.arerank(query, documents, k=request.k, query_embedding=request.embedding)
        return self._result(request, documents, timings)

    def _drive(self, plan: Generator[Any, Any, T]) -> T:
        """Run a query plan on the store: each step it yields is executed and its results sent back."""
        results = None
        try:
            while True:
                step = plan.send(results)
                if isinstance(step, list):
                    results = self.store.query_many(step)
                else:
                    name, params, placeholders = step
                    results = self.store.query(name, params, **placeholders)
        except StopIteration as done:
            return done.value

    async def _adrive(self, plan: Generator[Any, Any, T]) -> T:
        results = None
        try:
            while True:
                step = plan.send(results)
                if isinstance(step, list):
                    results = await self.store.aquery_many(step)
                else:
                    name, params, placeholders = step
                    results = await self.store.aquery(name, params, **placeholders)
        except StopIteration as done:
            return done.value

    # -- request preparation ---------------------------------------------------------------------

    def _compile(self, k: int | None, filters: Mapping[str, Any] | None) -> tuple[int, int, CompiledFilter]:
        k = checked_int("k", k if k is not None else self.config.k)
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        fetch = max(k, self.config.rerank_pool) if self.reranker is not None else k
        spec = filters if filters is not None else self.config.filters
        compiled = combine(compile_filter(spec), access_filter(self.config.access))
        return k, fetch, compiled

    def _request(self, query: str, k: int | None, filters: Any, embedding: list[float] | None, timings: dict[str, float]) -> _Request:
        _check_query(query)
        k, fetch, compiled = self._compile(k, filters)
        t = time.perf_counter()
        if embedding is None:
            embedding = self._embeddings.lookup(query) or self._embeddings.remember(query, _as_list(self.embedder.embed_query(query)))
        timings["embed"] = time.perf_counter() - t
        return _Request(query=query, k=k, fetch=fetch, filter=compiled, embedding=list(embedding))

    async def _arequest(
        self, query: str, k: int | None, filters: Any, embedding: list[float] | None, timings: dict[str, float]
    ) -> _Request:
        _check_query(query)
        k, fetch, compiled = self._compile(k, filters)
        t = time.perf_counter()
        if embedding is None:
            embedding = self._embeddings.lookup(query)
            if embedding is None:
                embedding = self._embeddings.remember(query, _as_list(await self.embedder.aembed_query(query)))
        timings["embed"] = time.perf_counter() - t
        return _Request(query=query, k=k, fetch=fetch, filter=compiled, embedding=list(embedding))

    def _result(self, request: _Request, documents: list[RetrievedDocument], timings: dict[str, float]) -> RetrievalResult:
        return RetrievalResult(
            query=request.query,
            mode=self.mode,
            documents=documents[: request.k],
            embed_ms=timings.get("embed", 0) * 1000,
            analyze_ms=timings.get("analyze", 0) * 1000,
            search_ms=timings["search"] * 1000,
            rerank_ms=timings.get("rerank", 0) * 1000,
        )

    # -- the query plan --------------------------------------------------------------------------

    def _plan(self, request: _Request) -> Plan:
        raise NotImplementedError

    def _knn_placeholders(self, request: _Request) -> dict[str, Any]:
        candidates = max(self.config.candidates or self.default_candidates, 2 * request.fetch)
        return {
            "candidates": checked_int("candidates", candidates),
            "ef": checked_int("ef", max(self.config.ef, candidates)),
            "filter": request.filter,
        }

    def _grouped(self, request: _Request, query_file: str) -> Plan:
        """Run one of the two published query patterns and aggregate/group its per-document rows."""
        limit = request.fetch if self.config.aggregate == "max" and self.config.group_by == "document" else 10_000
        params = {
            "embedding": request.vector,
            "threshold": self.config.threshold,
            "limit": limit,
            "filtered": bool(request.filter.condition),
            **request.filter.params,
        }
        results = yield query_file, params, self._knn_placeholders(request)
        documents = [_document(row, self.config.aggregate) for row in results[-1]]
        documents.sort(key=lambda d: -d.score)
        if self.config.group_by == "chunk":
            documents = _per_chunk(documents)
        return documents[: request.fetch]


class ChunkRetriever(BaseRetriever):
    """Direct chunk retrieval: nearest chunk embeddings, grouped by document."""

    mode = "chunk"
    default_candidates = 20

    def _plan(self, request: _Request) -> Plan:
        return (yield from self._grouped(request, "search_chunks"))


class ConceptRetriever(BaseRetriever):
    """Concept-based retrieval: nearest concepts, then the chunks that mention them, grouped by document."""

    mode = "concept"
    default_candidates = 10

    def _plan(self, request: _Request) -> Plan:
        return (yield from self._grouped(request, "search_concepts"))


class HybridRetriever(BaseRetriever):
    """Chunk vectors, BM25 full text and the concepts the query names, fused into one ranking.

    The concept channel needs a concept extractor for the query (default: the spaCy extractor used
    at ingestion, so a question names concepts exactly as the documents do).
    """

    mode = "hybrid"
    config_class: ClassVar[type[RetrieverConfig]] = HybridConfig
    config: HybridConfig

    def __init__(self, store: SurrealStore, *, extractor: Any = None, **kwargs: Any) -> None:
        super().__init__(store, **kwargs)
        self._extractor_spec = extractor
        self._extractor: Any = None
        self._query_concepts = _LRU()
        self._chunk_total: tuple[int, float] | None = None  # (chunks in the store, when counted)

    def _concepts(self, query: str) -> list[str]:
        cached = self._query_concepts.lookup(query)
        if cached is not None:
            return cached
        if self._extractor is None:
            from .extract import resolve_extractor

            self._extractor = resolve_extractor(self._extractor_spec)
        mentions = self._extractor.extract([query])[0]
        return self._query_concepts.remember(query, sorted({m.name for m in mentions}))

    def _request(self, query: str, k: int | None, filters: Any, embedding: list[float] | None, timings: dict[str, float]) -> _Request:
        request = super()._request(query, k, filters, embedding, timings)
        t = time.perf_counter()
        request.concepts = self._concepts(query)
        timings["analyze"] = time.perf_counter() - t
        return request

    async def _arequest(
        self, query: str, k: int | None, filters: Any, embedding: list[float] | None, timings: dict[str, float]
    ) -> _Request:
        import asyncio

        request = await super()._arequest(query, k, filters, embedding, timings)
        t = time.perf_counter()
        request.concepts = await asyncio.to_thread(self._concepts, query)
        timings["analyze"] = time.perf_counter() - t
        return request

    def _plan(self, request: _Request) -> Plan:
        channels = yield from self._channels(request)
        ranking = self._fuse(channels)
        return (yield from self._hydrate(request, ranking, channels))

    def _channels(self, request: _Request) -> Generator[Any, list[Any], dict[str, list[_Hit]]]:
        # N of the concept weights and of text_max_df: counted again now and then, as the store grows.
        if self._chunk_total is None or time.monotonic() - self._chunk_total[1] > _RECOUNT_SECONDS:
            self._chunk_total = (int((yield "count_chunks", {}, {})[-1] or 1), time.monotonic())
        chunk_total = self._chunk_total[0]
        params = {
            "embedding": request.vector,
            "threshold": self.config.threshold,
            "concept_ids": [RecordID("concept", name) for name in request.concepts],
            "chunk_total": chunk_total,
            "filtered": bool(request.filter.condition),
            **request.filter.params,
        }
        placeholders = self._knn_placeholders(request)
        steps: list[Step] = [("search_hybrid", params, placeholders)]
        words = content_words(request.query) if self.config.fulltext else []
        if words:
            max_df = math.ceil(self.config.text_max_df * chunk_total)
            text_params = {
                "words": words,
                "max_df": max_df,
                "max_matches": self.config.text_max_matches,
                "filtered": params["filtered"],
                **request.filter.params,
            }
            steps.append(("search_fulltext", text_params, {"candidates": placeholders["candidates"], "filter": request.filter}))
        results = yield steps
        out = results[0][-1]
        text_rows = results[1][-1] if words else []
        channels: dict[str, list[_Hit]] = {
            "vector": [_Hit.of(row, "vector") for row in out["vector"]],
            "text": [_Hit.of(row, "text") for row in text_rows],
            "concept": [_Hit.of(row, "concept") for row in out["concepts"]],
        }
        for hits in channels.values():
            hits.sort(key=lambda h: -h.score)
        return channels

    def _fuse(self, channels: Mapping[str, list[_Hit]]) -> list[tuple[str, float]]:
        """Documents by fused score, best first."""
        scores: dict[str, float] = defaultdict(float)
        for channel, hits in channels.items():
            weight = self.config.weights.get(channel, 1.0)  # type: ignore[call-overload]
            best = _best_per_document(hits)
            if self.config.fusion == "rrf":
                for rank, (doc, _) in enumerate(best):
                    scores[doc] += weight / (self.config.rrf_k + rank + 1)
            elif best:
                top, low = best[0][1], best[-1][1]
                for doc, score in best:
                    scores[doc] += weight * ((score - low) / (top - low) if top > low else 1.0)
        return sorted(scores.items(), key=lambda item: -item[1])

    def _hydrate(self, request: _Request, ranking: list[tuple[str, float]], channels: Mapping[str, list[_Hit]]) -> Plan:
        ranking = ranking[: request.fetch] if self.config.group_by == "document" else ranking
        chosen = {doc for doc, _ in ranking}
        hits_by_doc: dict[str, list[_Hit]] = defaultdict(list)
        for hits in channels.values():
            for hit in hits:
                if hit.doc in chosen:
                    hits_by_doc[hit.doc].append(hit)
        chunk_ids = {hit.chunk for hits in hits_by_doc.values() for hit in _top_chunks(hits, self.config.chunks_per_document)}
        params = {
            "documents": [RecordID("document", doc) for doc in chosen],
            "chunks": [RecordID("chunk", chunk) for chunk in chunk_ids],
        }
        out = (yield "hydrate_results", params, {})[-1]
        docs = {str(row["id"].id): row for row in out["documents"]}
        chunks = {str(row["id"].id): row for row in out["chunks"]}
        documents = []
        for doc, score in ranking:
            if doc not in docs:
                continue  # deleted between the two queries
            row = docs[doc]
            hits = hits_by_doc[doc]
            documents.append(
                RetrievedDocument(
                    id=doc,
                    title=row.get("title"),
                    source=row.get("source") or "",
                    metadata=row.get("metadata") or {},
                    score=score,
                    chunks=[
                        _chunk_from(chunks[c], hits)
                        for c in _top_chunks(hits, self.config.chunks_per_document, ids=True)
                        if c in chunks
                    ],
                    provenance=[path for hit in hits for path in hit.paths()],
                )
            )
        if self.config.group_by == "chunk":
            documents = _per_chunk(documents)
        return documents[: request.fetch]


class GraphRetriever(HybridRetriever):
    """Hybrid retrieval, then one hop along the graph: from the chunks of the best documents to the
    concepts they mention (only rare ones, ``max_df``), to other documents' chunks that mention them,
    scored by similarity to the query. Bridge documents join the fusion as a fourth channel."""

    mode = "graph"
    config_class: ClassVar[type[RetrieverConfig]] = GraphConfig
    config: GraphConfig

    def _plan(self, request: _Request) -> Plan:
        channels = yield from self._channels(request)
        ranking = self._fuse(channels)
        seeds = [doc for doc, _ in ranking[: self.config.seeds]]
        if seeds:
            params = {
                "seeds": [RecordID("document", doc) for doc in seeds],
                "embedding": request.vector,
                "max_df": self.config.max_df,
                **request.filter.params,
            }
            out = (yield "expand_graph", params, {"filter": request.filter})[-1]
            graph = _graph_hits(out["paths"], out["chunks"], self.config.max_paths)
            # The seeds lead the graph channel, so the hop adds to them instead of outranking them.
            lead = [_Hit(doc=doc, chunk="", score=2.0, channel="graph") for doc in seeds]
            ranking = self._fuse({**channels, "graph": lead + graph})
            channels = {**channels, "graph": graph}
        return (yield from self._hydrate(request, ranking, channels))


class _Hit(BaseModel):
    """One chunk a channel found, with the concepts (and graph hop) that led to it."""

    doc: str
    chunk: str
    score: float
    channel: Channel
    concepts: list[ConceptMatch] = Field(default_factory=list)
    via: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any], channel: Channel) -> _Hit:
        concepts = [
            ConceptMatch(id=str(c["id"].id), name=c["name"], score=float(c["score"])) for c in row.get("concepts") or []
        ]
        if channel == "graph":
            concepts = [ConceptMatch(id=str(row["concept"].id), name=row["name"], score=float(row["score"]))]
        chunk = str(row["chunk"].id)
        return cls(
            doc=str(row["doc"].id) if "doc" in row else chunk_document_key(chunk),
            chunk=chunk,
            score=float(row["score"]),
            channel=channel,
            concepts=concepts,
            via=str(row["seed"].id) if channel == "graph" else None,
        )

    def paths(self) -> list[ProvenancePath]:
        base = {"channel": self.channel, "score": self.score, "document_id": self.doc, "chunk_id": self.chunk, "via_chunk_id": self.via}
        if not self.concepts:
            return [ProvenancePath(**base)]
        return [ProvenancePath(**base, concept=concept) for concept in self.concepts]


def _graph_hits(paths: list[dict[str, Any]], chunks: list[dict[str, Any]], limit: int) -> list[_Hit]:
    """The best ``limit`` paths, each scored by the chunk it reaches (chunks the filter dropped are absent)."""
    reached = {str(row["chunk"].id): row for row in chunks}
    rows = [{**path, **reached[key]} for path in paths if (key := str(path["chunk"].id)) in reached]
    rows.sort(key=lambda row: -row["score"])
    return [_Hit.of(row, "graph") for row in rows[:limit]]


def _best_per_document(hits: list[_Hit]) -> list[tuple[str, float]]:
    best: dict[str, float] = {}
    for hit in hits:  # sorted best first
        best.setdefault(hit.doc, hit.score)
    return list(best.items())


def _top_chunks(hits: list[_Hit], n: int, *, ids: bool = False) -> list[Any]:
    """A document's chunks ordered by how many channels found them, then by best rank; first ``n``."""
    votes: dict[str, int] = defaultdict(int)
    order: dict[str, int] = {}
    for position, hit in enumerate(hits):
        if hit.chunk:
            votes[hit.chunk] += 1
            order.setdefault(hit.chunk, position)
    ranked = sorted(votes, key=lambda c: (-votes[c], order[c]))[:n]
    if ids:
        return ranked
    keep = set(ranked)
    return [hit for hit in hits if hit.chunk in keep]


def _chunk_from(row: Mapping[str, Any], hits: list[_Hit]) -> ChunkHit:
    chunk_id = str(row["id"].id)
    mine = [hit for hit in hits if hit.chunk == chunk_id]
    concepts: dict[str, ConceptMatch] = {}
    for hit in mine:
        for concept in hit.concepts:
            if concept.id not in concepts or concept.score > concepts[concept.id].score:
                concepts[concept.id] = concept
    vector = [hit.score for hit in mine if hit.channel in ("vector", "graph")]
    score = max(vector) if vector else max(hit.score for hit in mine)
    ranked = sorted(concepts.values(), key=lambda c: -c.score)
    return ChunkHit(id=chunk_id, index=row["index"], content=row["content"], score=score, concepts=ranked)


def _document(row: Mapping[str, Any], aggregate: str) -> RetrievedDocument:
    chunks = sorted((_chunk(c) for c in row["chunks"]), key=lambda c: -c.score)
    doc_id = str(row["id"].id)
    score = {"max": row["score"], "mean": row.get("mean", row["score"]), "count": row.get("hits", len(chunks))}[aggregate]
    channel: Channel = "concept" if any(c.concepts for c in chunks) else "vector"
    provenance = [
        ProvenancePath(
            channel=channel,
            score=concept.score if chunk.concepts else chunk.score,
            document_id=doc_id,
            chunk_id=chunk.id,
            concept=concept,
        )
        for chunk in chunks
        for concept in (chunk.concepts or [None])  # type: ignore[list-item]
    ]
    return RetrievedDocument(
        id=doc_id,
        title=row.get("title"),
        source=row.get("source") or "",
        metadata=row.get("metadata") or {},
        score=float(score),
        chunks=chunks,
        provenance=provenance,
    )


def _chunk(row: Mapping[str, Any]) -> ChunkHit:
    concepts = [
        ConceptMatch(id=str(c["id"].id), name=c["name"], score=float(c["score"]))
        for c in sorted(row.get("concepts") or [], key=lambda c: -c["score"])
    ]
    return ChunkHit(id=str(row["id"].id), index=row["index"], content=row["content"], score=float(row["score"]), concepts=concepts)


def _per_chunk(documents: list[RetrievedDocument]) -> list[RetrievedDocument]:
    """group_by='chunk': one result per chunk (a document may appear more than once), best first."""
    rows = [
        doc.model_copy(
            update={
                "score": chunk.score,
                "chunks": [chunk],
                "provenance": [p for p in doc.provenance if p.chunk_id == chunk.id],
            }
        )
        for doc in documents
        for chunk in doc.chunks
    ]
    return sorted(rows, key=lambda d: -d.score)


def _check_query(query: Any) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"the query must be a non-empty string, got {query!r}")


def _as_list(vector: np.ndarray) -> list[float]:
    return np.asarray(vector, dtype=np.float32).tolist()


_WORD = re.compile(r"\w+")


def content_words(text: str) -> list[str]:
    """The query's distinct words minus English stop words, for the BM25 channel: an OR over "the"
    and "which" would match and score nearly every chunk."""
    stop_words: Collection[str]
    try:
        from spacy.lang.en.stop_words import STOP_WORDS as stop_words
    except ImportError:  # spaCy is optional; without it every word is searched
        stop_words = frozenset()
    return list(dict.fromkeys(w for w in _WORD.findall(text.lower()) if w not in stop_words))


RETRIEVERS: dict[str, type[BaseRetriever]] = {
    "chunk": ChunkRetriever,
    "concept": ConceptRetriever,
    "hybrid": HybridRetriever,
    "graph": GraphRetriever,
}


def make_retriever(mode: str, store: SurrealStore, **kwargs: Any) -> BaseRetriever:
    """Build the retriever for ``mode`` (chunk, concept, hybrid, graph); options go to its config."""
    try:
        cls = RETRIEVERS[mode]
    except KeyError:
        raise ValueError(f"unknown mode {mode!r}: choose one of {', '.join(RETRIEVERS)}") from None
    return cls(store, **kwargs)
