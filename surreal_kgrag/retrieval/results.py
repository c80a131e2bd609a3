"""What a retriever returns: documents with the chunks, concepts and paths that led to them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, Field, computed_field, model_validator

from ..wire import without_nulls

Channel = Literal["vector", "text", "concept", "graph", "document"]
#: What a framework's vector store writes beside a node's metadata to rebuild the node (LlamaIndex's
#: ``node_to_metadata_dict``: the node serialised again, and its type). Never part of a result's
#: ``metadata``, which reaches prompts; a retrieved document keeps them in ``node_storage``.
RESERVED_METADATA_KEYS = frozenset({"_node_content", "_node_type"})


def _shown(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: item for key, item in without_nulls(value or {}).items() if key not in RESERVED_METADATA_KEYS}


#: A document's metadata as stored, less ``RESERVED_METADATA_KEYS``: a stored null reads as None.
Metadata = Annotated[dict[str, Any], BeforeValidator(_shown)]


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
    page_start: int | None = Field(None, description="first page (1-based) of a paged document (PDF) the chunk is on")
    page_end: int | None = Field(None, description="last page the chunk is on")
    section: list[str] = Field(default_factory=list, description="the headings the chunk lies under, outermost first")
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


class WithNodeStorage(BaseModel):
    """A stored document read back: ``metadata`` (``Metadata``) without the reserved keys, which are
    set aside in ``node_storage``."""

    node_storage: dict[str, Any] = Field(
        default_factory=dict,
        exclude=True,
        repr=False,
        description="the stored metadata's RESERVED_METADATA_KEYS, for the framework that wrote them; never serialised",
    )

    @model_validator(mode="before")
    @classmethod
    def _set_aside_node_storage(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "node_storage" not in data and isinstance(data.get("metadata"), Mapping):
            reserved = {key: data["metadata"][key] for key in RESERVED_METADATA_KEYS if key in data["metadata"]}
            return {**data, "node_storage": reserved}
        return data


class RetrievedDocument(WithNodeStorage):
    id: str = Field(description="the document key (corpus id or file path)")
    title: str | None
    source: str
    metadata: Metadata
    score: float
    chunks: list[ChunkHit]
    chunk_count: int | None = Field(None, description="chunks the document has (indexes 0 .. chunk_count - 1), when the query read it")
    provenance: list[ProvenancePath] = Field(default_factory=list)

    @property
    def concepts(self) -> list[ConceptMatch]:
        seen: dict[str, ConceptMatch] = {}
        for chunk in self.chunks:
            for concept in chunk.concepts:
                if concept.id not in seen or concept.score > seen[concept.id].score:
                    seen[concept.id] = concept
        return sorted(seen.values(), key=lambda c: -c.score)


#: The buckets a search's plan records its parts under (``surreal_kgrag.retrieval.plan``); a plan's
#: queries are recorded under ``plan.SEARCH``, which is ``DATABASE``.
EMBED, ANALYZE, DATABASE, RANK, HYDRATE, RERANK = "embed", "analyze", "search", "rank", "hydrate", "rerank"


class Timings(BaseModel):
    """Where the time of one call went, in milliseconds. ``wall_ms`` is the wall-clock time of the
    whole call; the parts add up to it exactly (``other_ms`` is what no part accounts for)."""

    wall_ms: float = Field(0.0, description="wall-clock time of the whole call, the question's embedding included")
    embed_ms: float = Field(
        0.0,
        description="embedding the question (0 when its embedding was given or cached); when it ran beside the search "
        "(a remote service, a child process: embeds_elsewhere), only the time the search waited for it",
    )
    analyze_ms: float = Field(0.0, description="reading the question: spaCy (hybrid), its n-grams, periods and words (0 when cached)")
    database_ms: float = Field(0.0, description="the queries' round trips, answers decoded")
    rank_ms: float = Field(0.0, description="client-side ranking: reading the channels, the walk, fusion")
    hydrate_ms: float = Field(0.0, description="client-side shaping of the results (the hydration query is database time)")
    rerank_ms: float = Field(0.0, description="the reranker, when there is one")
    other_ms: float = Field(0.0, description="the rest of the wall-clock time: preparing the request, driving the plan")

    #: The parts, in the order they are printed.
    PARTS: ClassVar[tuple[str, ...]] = ("embed", "analyze", "database", "rank", "hydrate", "rerank", "other")

    @classmethod
    def of(cls, wall_seconds: float, buckets: Mapping[str, float]) -> Timings:
        """From a call's wall-clock seconds and a plan's seconds per bucket; a bucket no part names
        counts as other."""
        parts = {f"{part}_ms": buckets.get(bucket, 0.0) * 1000 for part, bucket in PART_BUCKETS.items()}
        wall_ms = wall_seconds * 1000
        return cls(wall_ms=wall_ms, other_ms=wall_ms - sum(parts.values()), **parts)

    def parts(self) -> dict[str, float]:
        """Each part's milliseconds, by part name (embed, analyze, database, rank, hydrate, rerank, other)."""
        return {part: getattr(self, f"{part}_ms") for part in self.PARTS}

    def describe(self) -> str:
        """ "41.2 ms wall-clock: embed 24.0, analyze 1.1, database 12.9, rank 2.0, hydrate 0.8, other 0.4"
        (a part that took no time is left out)."""
        parts = ", ".join(f"{part} {ms:.1f}" for part, ms in self.parts().items() if ms)
        return f"{self.wall_ms:.1f} ms wall-clock: {parts}"


#: The bucket each part (but other) is recorded under, by part name.
PART_BUCKETS = {"embed": EMBED, "analyze": ANALYZE, "database": DATABASE, "rank": RANK, "hydrate": HYDRATE, "rerank": RERANK}


class RetrievalResult(BaseModel):
    query: str
    mode: str
    documents: list[RetrievedDocument]
    timings: Timings = Field(default_factory=Timings, description="wall-clock time of the search and its parts")

    # The names results had before ``timings``, kept for their readers.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def embed_ms(self) -> float:
        """``timings.embed_ms``."""
        return self.timings.embed_ms

    @computed_field  # type: ignore[prop-decorator]
    @property
    def analyze_ms(self) -> float:
        """``timings.analyze_ms``."""
        return self.timings.analyze_ms

    @computed_field  # type: ignore[prop-decorator]
    @property
    def search_ms(self) -> float:
        """``timings.database_ms``: the database time alone, not the search's wall-clock (``timings.wall_ms``)."""
        return self.timings.database_ms

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rerank_ms(self) -> float:
        """``timings.rerank_ms``."""
        return self.timings.rerank_ms


def placement(row: Mapping[str, Any]) -> dict[str, Any]:
    """A chunk row's pages and section, for :class:`ChunkHit` (absent on chunks without a layout)."""
    return {"page_start": row.get("page_start"), "page_end": row.get("page_end"), "section": list(row.get("section") or [])}


def where(chunk: ChunkHit) -> str:
    """ "p. 4", "pp. 4-5", the section path after it ("p. 4, Item 1 > Notes"), or "" when unknown."""
    parts = []
    if chunk.page_start is not None:
        end = chunk.page_end or chunk.page_start
        parts.append(f"p. {chunk.page_start}" if end == chunk.page_start else f"pp. {chunk.page_start}-{end}")
    if chunk.section:
        parts.append(" > ".join(chunk.section))
    return ", ".join(parts)
