"""Retrievers: embed the query, run one parameterised SurrealQL file, shape the rows into typed results.

Each retriever follows the same template: ``search()`` -> ``_rows()`` (the query) -> ``_format()``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .embed import Embedder, resolve_embedder
from .store import SurrealStore, checked_int

Mode = Literal["chunk", "concept"]


class ConceptMatch(BaseModel):
    """A concept the query matched, with its similarity to the query."""

    id: str
    name: str
    score: float


class ChunkHit(BaseModel):
    id: str
    index: int
    content: str
    score: float
    concepts: list[ConceptMatch] = Field(default_factory=list, description="concepts that led to this chunk")


class RetrievedDocument(BaseModel):
    id: str = Field(description="the document key (corpus id or file path)")
    title: str | None
    source: str
    metadata: dict[str, Any]
    score: float
    chunks: list[ChunkHit]

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
    search_ms: float = Field(description="time spent in the database")


class RetrieverConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    k: int = Field(5, ge=1, le=1000, description="documents returned")
    candidates: int = Field(40, ge=1, le=10_000, description="vectors fetched by KNN before grouping")
    ef: int = Field(80, ge=1, le=10_000, description="HNSW search breadth")
    threshold: float = Field(0.0, ge=-1.0, le=1.0, description="minimum similarity of a chunk or concept")


class _QueryEmbeddingCache:
    def __init__(self, embedder: Embedder, size: int = 1024) -> None:
        self.embedder = embedder
        self.size = size
        self._items: OrderedDict[str, list[float]] = OrderedDict()

    def get(self, text: str) -> list[float] | None:
        vector = self._items.get(text)
        if vector is not None:
            self._items.move_to_end(text)
        return vector

    def put(self, text: str, vector: np.ndarray) -> list[float]:
        values = np.asarray(vector, dtype=np.float32).tolist()
        self._items[text] = values
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return values


class BaseRetriever:
    query_file: ClassVar[str]
    mode: ClassVar[str]

    def __init__(self, store: SurrealStore, *, embedder: Embedder | Any = None, config: RetrieverConfig | None = None, **options: Any) -> None:
        self.store = store
        self.embedder = resolve_embedder(embedder)
        self.config = config or RetrieverConfig(**options)
        self._cache = _QueryEmbeddingCache(self.embedder)

    def _params(self, embedding: list[float], k: int) -> tuple[dict[str, Any], dict[str, int]]:
        candidates = max(self.config.candidates, k)
        integers = {"candidates": checked_int("candidates", candidates), "ef": checked_int("ef", max(self.config.ef, candidates))}
        return {"embedding": embedding, "threshold": self.config.threshold, "limit": checked_int("k", k)}, integers

    def search(self, query: str, *, k: int | None = None, embedding: list[float] | None = None) -> RetrievalResult:
        k = k or self.config.k
        t = time.perf_counter()
        if embedding is None:
            embedding = self._cache.get(query) or self._cache.put(query, self.embedder.embed_query(query))
        t_embed = time.perf_counter()
        params, integers = self._params(list(embedding), k)
        rows = self.store.query(self.query_file, params, **integers)[-1]
        return self._format(query, rows, t_embed - t, time.perf_counter() - t_embed)

    async def asearch(self, query: str, *, k: int | None = None, embedding: list[float] | None = None) -> RetrievalResult:
        k = k or self.config.k
        t = time.perf_counter()
        if embedding is None:
            cached = self._cache.get(query)
            embedding = cached or self._cache.put(query, await self.embedder.aembed_query(query))
        t_embed = time.perf_counter()
        params, integers = self._params(list(embedding), k)
        rows = (await self.store.aquery(self.query_file, params, **integers))[-1]
        return self._format(query, rows, t_embed - t, time.perf_counter() - t_embed)

    def _format(self, query: str, rows: list[dict[str, Any]], embed_s: float, search_s: float) -> RetrievalResult:
        documents = []
        for row in rows:
            chunks = sorted((_chunk(c) for c in row["chunks"]), key=lambda c: -c.score)
            documents.append(
                RetrievedDocument(
                    id=str(row["id"].id),
                    title=row.get("title"),
                    source=row.get("source") or "",
                    metadata=row.get("metadata") or {},
                    score=float(row["score"]),
                    chunks=chunks,
                )
            )
        return RetrievalResult(
            query=query, mode=self.mode, documents=documents, embed_ms=embed_s * 1000, search_ms=search_s * 1000
        )


def _chunk(row: dict[str, Any]) -> ChunkHit:
    concepts = [
        ConceptMatch(id=str(c["id"].id), name=c["name"], score=float(c["score"]))
        for c in sorted(row.get("concepts") or [], key=lambda c: -c["score"])
    ]
    return ChunkHit(id=row["id"].id, index=row["index"], content=row["content"], score=float(row["score"]), concepts=concepts)


class ChunkRetriever(BaseRetriever):
    """Direct chunk retrieval: nearest chunk embeddings, grouped by document."""

    query_file = "search_chunks"
    mode = "chunk"


class ConceptRetriever(BaseRetriever):
    """Concept-based retrieval: nearest concepts, then the chunks that mention them, grouped by document."""

    query_file = "search_concepts"
    mode = "concept"

    def __init__(self, store: SurrealStore, **kwargs: Any) -> None:
        kwargs.setdefault("candidates", 20)
        super().__init__(store, **kwargs)


RETRIEVERS: dict[str, type[BaseRetriever]] = {"chunk": ChunkRetriever, "concept": ConceptRetriever}


def make_retriever(mode: str, store: SurrealStore, **kwargs: Any) -> BaseRetriever:
    try:
        cls = RETRIEVERS[mode]
    except KeyError:
        raise ValueError(f"unknown mode {mode!r}: choose one of {', '.join(RETRIEVERS)}") from None
    return cls(store, **kwargs)

