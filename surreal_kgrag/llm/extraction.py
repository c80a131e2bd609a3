"""What the extraction model is asked to reply, and what :class:`~.extractor.LLMExtractor` returns."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..models import ChunkGraph, LLMIngestStats, Relation
from .settings import LLMUsage

# -- what the model replies ----------------------------------------------------------------------


class ReplyConcept(BaseModel):
    name: str = Field(min_length=1, max_length=300)
    kind: str = Field(min_length=1, max_length=100)


class ReplyRelation(BaseModel):
    subject: str = Field(min_length=1, max_length=300)
    relation: str = Field(min_length=1, max_length=100)
    object: str = Field(min_length=1, max_length=300)


class ExtractionReply(BaseModel):
    """The JSON the model is asked for."""

    concepts: list[ReplyConcept] = Field(default_factory=list)
    relations: list[ReplyRelation] = Field(default_factory=list)


# -- what the extractor returns ------------------------------------------------------------------


class ChunkExtraction(ChunkGraph):
    source: Literal["llm", "cache", "fallback"]


class ExtractionStats(BaseModel):
    """Counts of one or more extraction runs."""

    chunks: int = 0
    from_cache: int = 0
    from_llm: int = 0
    fallbacks: int = Field(0, description="chunks handed to the fallback extractor")
    failed_requests: int = Field(0, description="chunks whose request failed after the client's retries")
    malformed_replies: int = Field(0, description="replies that were not the expected JSON (repaired or not)")
    repaired: int = Field(0, description="chunks whose reply was valid after sending the error back")
    concepts_dropped: int = Field(0, description="names with nothing left after normalisation")
    concepts_rejected: int = Field(0, description="concepts of a kind outside the ontology, dropped")
    concepts_flagged: int = Field(0, description="concepts of a kind outside the ontology, kept as 'unlisted:<kind>'")
    relations_rejected: int = Field(0, description="relations of an unknown type, wrong roles, or a rejected end, dropped")
    relations_flagged: int = Field(0, description="relations of an unknown type or wrong roles, kept with in_ontology=false")
    relations_dropped: int = Field(0, description="relations whose subject or object is not a concept of the reply")
    usage: LLMUsage = Field(default_factory=LLMUsage)

    def add(self, other: ExtractionStats) -> None:
        for name in type(self).model_fields:
            if name != "usage":
                setattr(self, name, getattr(self, name) + getattr(other, name))
        self.usage.add(other.usage)


class GraphExtraction(BaseModel):
    chunks: list[ChunkExtraction]
    stats: ExtractionStats

    def ingest_stats(self) -> LLMIngestStats:
        """The counts an ingest run reports (``IngestSummary.llm``)."""
        stats, usage = self.stats, self.stats.usage
        return LLMIngestStats(
            chunks=stats.chunks,
            cache_hits=stats.from_cache,
            fallbacks=stats.fallbacks,
            requests=usage.requests,
            retries=usage.retries,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )


__all__ = [
    "ChunkExtraction",
    "ExtractionReply",
    "ExtractionStats",
    "GraphExtraction",
    "Relation",
    "ReplyConcept",
    "ReplyRelation",
]
