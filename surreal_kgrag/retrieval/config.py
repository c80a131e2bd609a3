"""Retriever settings: typed, frozen, each with its documented default."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..schema import CHUNK_LIST_MAX
from .results import Channel

Mode = Literal["chunk", "concept", "hybrid", "graph"]
#: The mode of the CLI's query and answer, the core and the LangChain and LlamaIndex integrations
#: when none is named: the best or within a point of recall@5 of the best on every development
#: corpus (README, "Which mode"). The agent tools' ``search_chunks`` (and the MCP server) default to
#: ``chunk``, the nearest chunks its name promises; ``eval`` runs chunk beside it unless told.
DEFAULT_MODE: Mode = "graph"
#: RRF weight of the document channel (surreal_kgrag.retrieval.documents) in hybrid and concept mode
#: (graph: 16, beside the walk's 8). Chosen on sec10q, where 4 or more gives the same recall in both
#: modes; on HotpotQA it moves recall@5 by +2.0 (hybrid) and 0 (concept). See docs/benchmarks.md.
DOCUMENT_WEIGHT = 4.0


class RetrieverConfig(BaseModel):
    """Settings shared by every retriever; each documents its default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(5, ge=1, le=1000, description="results returned (documents, or chunks with group_by='chunk')")
    candidates: int | None = Field(
        None, ge=1, le=5000,
        description="vectors fetched by KNN before grouping (default: 20 chunks, 40 for hybrid, 20 for graph and concept; "
        "the pool grows up to 5,000 while it finds fewer than k documents)",
    )
    ef: int = Field(80, ge=1, le=10_000, description="HNSW search breadth")
    threshold: float = Field(
        0.0, ge=-1.0, le=1.0,
        description="minimum cosine similarity of a chunk the KNN finds (graph and concept mode: of a dense seed and a "
        "vector hit; the chunks the other channels find are not compared)",
    )
    group_by: Literal["document", "chunk"] = "document"
    filters: dict[str, Any] | None = Field(None, description="default filter, see surreal_kgrag.retrieval.filters")
    access: list[str] | None = Field(None, description="only documents carrying one of these access labels")
    rerank_pool: int = Field(20, ge=1, le=1000, description="documents handed to the reranker before cutting to k")
    max_query_chars: int = Field(
        10_000, ge=1, le=1_000_000,
        description="longest query accepted (the embedder reads its first 256 tokens; spaCy, in hybrid mode, and the "
        "name lookup, in graph and concept mode, all of it)",
    )


class ChunkConfig(RetrieverConfig):
    """The chunk mode: nearest chunks, grouped by document."""

    aggregate: Literal["max", "mean", "count"] = Field(
        "max", description="how a document's chunk similarities make its score: the best, their mean, or how many"
    )


DEFAULT_WEIGHTS: dict[Channel, float] = {"vector": 1.0, "text": 1.0, "concept": 1.0, "document": DOCUMENT_WEIGHT}


class HybridConfig(RetrieverConfig):
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = Field(5, ge=1, description="rank constant of reciprocal rank fusion (small: trust the top ranks)")
    weights: dict[Channel, float] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        description="weight of each of the mode's channels in the fusion; a channel left out keeps its default, and "
        "a channel weighted 0 only fills the ranking up to k",
    )
    fulltext: bool = Field(True, description="use the BM25 channel")
    text_max_df: float = Field(
        0.02, gt=0.0, le=1.0,
        description="BM25 leaves out query words found in more than this share of the store's chunks (1.0 keeps all)",
    )
    text_max_matches: int = Field(
        300, ge=1, le=10_000,
        description="BM25 takes words rarest first until their chunk counts add up to this: bounds its cost (each "
        "match costs about 40 microseconds to score)",
    )
    concept_max_chunks: int = Field(
        1000, ge=1, le=10_000,
        description="concept channel: a concept the question names that more chunks mention is left out (reading its "
        "edges costs about 8 microseconds each, and they grow with the store)",
    )
    chunks_per_document: int = Field(3, ge=1, le=100, description="chunks kept per fused document")
    document_per_name: int = Field(
        100, ge=2, le=10_000,
        description="document channel: a name this many documents or more carry is a hub, not matched (bounds each name's read)",
    )
    document_pool: int = Field(8, ge=1, le=1000, description="document channel: most named documents whose passages are read")
    document_passage_pool: int = Field(
        100, ge=1, le=5000,
        description="document channel: a named document's passages are its chunks among this many nearest to the question "
        "(its best ones, up to chunks_per_document); a document with none there has all its chunks scanned (exact, in "
        "proportion to its length; best named first, at most 500 chunks together but always the first)",
    )
    document_min_chunks: int = Field(
        3, ge=1, description="document channel: documents shorter than this many chunks are left to the other channels"
    )
    document_share: float = Field(
        0.3, ge=0.0, le=1.0,
        description="document channel: a named document scoring below this share of the best one is left out (a name "
        "most documents carry, such as a form name, names none of them)",
    )


    @field_validator("weights")
    @classmethod
    def _every_channel(cls, weights: dict[Channel, float]) -> dict[Channel, float]:
        """The mode's default weights, with those given in their place, so every channel of the mode
        has one weight wherever it is read."""
        factory = cls.model_fields["weights"].default_factory
        assert factory is not None
        defaults: dict[Channel, float] = factory()  # type: ignore[call-arg]
        unknown = sorted(set(weights) - set(defaults))
        if unknown:
            raise ValueError(f"this mode has no channel {', '.join(unknown)}; its channels are {', '.join(defaults)}")
        bad = sorted(channel for channel, weight in weights.items() if weight < 0 or not math.isfinite(weight))
        if bad:
            raise ValueError(f"a weight is a finite number, 0 or more; got {', '.join(f'{c}={weights[c]}' for c in bad)}")
        return {**defaults, **weights}


class GraphConfig(HybridConfig):
    """The graph mode: Personalized PageRank over the bounded subgraph around the question (see
    :mod:`surreal_kgrag.retrieval.walk`), fused with BM25. Defaults chosen on the development sets,
    see the README's "Defaults and the measurements behind them"."""

    weights: dict[Channel, float] = Field(
        default_factory=lambda: dict[Channel, float]({"graph": 8.0, "text": 1.0, "vector": 0.0, "document": 16.0}),
        description="RRF weights: the walk and the documents the question names lead, BM25 breaks their ties; vector 0 "
        "only fills up to k",
    )
    dense_seeds: bool = Field(True, description="the KNN chunks are seeds of the walk (reset mass dense_reset)")
    dense_reset: float = Field(1.0, ge=0.0, description="reset mass of the dense seeds next to the question's concepts (1)")
    dense_temperature: float = Field(0.03, gt=0.0, description="softmax temperature of the dense seeds' similarities")
    max_df: int = Field(
        5, ge=1, le=CHUNK_LIST_MAX,
        description="concepts mentioned by more chunks are hubs: not walked through (at most 32: the store lists the "
        "chunks of concepts up to that)",
    )
    hop2: bool = Field(True, description="fetch the chunks of the seeds' concepts (the bridge hop)")
    damping: float = Field(0.8, ge=0.0, lt=1.0, description="probability that the walk follows an edge")
    iterations: int = Field(30, ge=1, le=200, description="power iterations of the walk")
    own_share: float = Field(0.9, ge=0.0, le=1.0, description="share of a title concept's mass sent to its own document")
    np_weight: float = Field(0.3, ge=0.0, description="weight of a chunk -> noun-phrase edge next to an entity's")
    gamma: float = Field(1.0, ge=0.0, description="chunk -> concept edge weight = rarity ** gamma")
    relation_share: float = Field(0.25, ge=0.0, le=1.0, description="share a concept sends along RELATES_TO edges")
    question_np: float = Field(0.5, ge=0.0, description="match quality of a noun phrase named in the question (names: 1)")
    question_lowercase: float = Field(0.1, ge=0.0, description="factor for a name written all lower-case in the question")
    question_rarity: float = Field(1.0, ge=0.0, description="exponent of the rarity factor of a question concept's weight")


class ConceptConfig(GraphConfig):
    """The concept mode: the same walk, started only from the concepts the question names; the
    KNN chunks fill the ranking up to k when the walk finds fewer documents."""

    weights: dict[Channel, float] = Field(
        default_factory=lambda: dict[Channel, float]({"graph": 1.0, "text": 0.0, "vector": 0.0, "document": DOCUMENT_WEIGHT})
    )
    fulltext: bool = Field(False, description="no BM25 channel")
    dense_seeds: bool = Field(False, description="the walk starts from the question's concepts only")
    dense_reset: float = Field(0.0, ge=0.0)
    max_df: int = Field(
        10, ge=1, le=CHUNK_LIST_MAX,
        description="a named concept in more chunks than this is not walked from; with no other seeds, 5 cost "
        "7 points of recall@5 on HotpotQA (79.0 against 86.2) and 0.3 on MuSiQue",
    )
