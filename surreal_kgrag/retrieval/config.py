"""Retriever settings: typed, frozen, each with its documented default."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .results import Channel

Mode = Literal["chunk", "concept", "hybrid", "graph"]


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
    filters: dict[str, Any] | None = Field(None, description="default filter, see surreal_kgrag.retrieval.filters")
    access: list[str] | None = Field(None, description="only documents carrying one of these access labels")
    rerank_pool: int = Field(20, ge=1, le=1000, description="documents handed to the reranker before cutting to k")
    max_query_chars: int = Field(
        10_000, ge=1, le=1_000_000,
        description="longest query accepted (the embedder reads its first 256 tokens; spaCy, in hybrid and graph "
        "mode, all of it)",
    )


DEFAULT_WEIGHTS: dict[Channel, float] = {"vector": 1.0, "text": 1.0, "concept": 1.0, "graph": 0.2}


class HybridConfig(RetrieverConfig):
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = Field(5, ge=1, description="rank constant of reciprocal rank fusion (small: trust the top ranks)")
    weights: dict[Channel, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
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
