"""Channel hits and how they are fused into one ranking (hybrid and graph retrieval)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..ids import chunk_document_key
from .results import Channel, ChunkHit, ConceptMatch, ProvenancePath, RetrievedDocument, placement


class Hit(BaseModel):
    """One chunk a channel found, with the concepts (and graph hop) that led to it."""

    doc: str
    chunk: str
    score: float
    channel: Channel
    concepts: list[ConceptMatch] = Field(default_factory=list)
    via: str | None = None
    #: The share of its channel's weight the hit carries in the fusion: less than 1 for a document
    #: the question names only in lower-case words (``documents.LOWERCASE``), which rank fusion would
    #: otherwise weigh like a name.
    weight: float = 1.0
    #: Its document's place in its channel (1 = first), when the channel ranks documents with ties
    #: (the document channel: equally named documents share the mean of their places); else its
    #: document's position in the channel's order.
    place: float | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any], channel: Channel) -> Hit:
        """A query row's hit (the text, vector and concept channels; the graph walk makes its own)."""
        concepts = [ConceptMatch(id=str(c["id"].id), name=c["name"], score=float(c["score"])) for c in row.get("concepts") or []]
        chunk = str(row["chunk"].id)
        return cls(
            doc=str(row["doc"].id) if "doc" in row else chunk_document_key(chunk),
            chunk=chunk,
            score=float(row["score"]),
            channel=channel,
            concepts=concepts,
        )

    def paths(self) -> list[ProvenancePath]:
        base = {"channel": self.channel, "score": self.score, "document_id": self.doc, "chunk_id": self.chunk, "via_chunk_id": self.via}
        if not self.concepts:
            return [ProvenancePath(**base)]
        return [ProvenancePath(**base, concept=concept) for concept in self.concepts]


def fuse(
    channels: Mapping[str, list[Hit]],
    weights: Mapping[Any, float],
    fusion: Literal["rrf", "weighted"],
    rrf_k: int,
) -> list[tuple[str, float]]:
    """Documents by fused score, best first; each channel's hits are sorted best first. A document
    counts once per channel, at its best hit there."""
    scores = _fused({channel: best_per_document(hits) for channel, hits in channels.items()}, weights, fusion, rrf_k)
    return sorted(scores.items(), key=lambda item: -item[1])


def fuse_chunks(
    channels: Mapping[str, list[Hit]],
    weights: Mapping[Any, float],
    fusion: Literal["rrf", "weighted"],
    rrf_k: int,
) -> dict[str, float]:
    """Each chunk's fused score, by the same formula as :func:`fuse` over the chunks' own ranks, so a
    chunk's score and its document's are on one scale. A chunk counts once per channel however
    many paths (concepts, graph hops) led to it there."""
    ranked = {channel: _best(hits, "chunk") for channel, hits in channels.items()}
    return dict(_fused(ranked, weights, fusion, rrf_k))


def _fused(
    ranked: Mapping[str, list[tuple[str, float, float, float | None]]],
    weights: Mapping[Any, float],
    fusion: Literal["rrf", "weighted"],
    rrf_k: int,
) -> dict[str, float]:
    """Reciprocal rank fusion (sum of weight / (rrf_k + rank)) or the sum of weighted min-max
    normalised scores, over per-channel lists of (key, score, the hit's share of the weight, its
    place when the channel gives one, else its position), best first."""
    scores: dict[str, float] = defaultdict(float)
    for channel, best in ranked.items():
        weight = weights[channel]
        if fusion == "rrf":
            for position, (key, _, share, place) in enumerate(best, start=1):
                scores[key] += weight * share / (rrf_k + (place or position))
        elif best:
            top, low = best[0][1], best[-1][1]
            for key, score, share, _ in best:
                scores[key] += weight * share * ((score - low) / (top - low) if top > low else 1.0)
    return scores


def best_per_document(hits: list[Hit]) -> list[tuple[str, float, float, float | None]]:
    """Each document's best hit among ``hits`` (sorted best first), as ``(doc, score, weight, place)``."""
    return _best(hits, "doc")


def _best(hits: list[Hit], by: Literal["doc", "chunk"]) -> list[tuple[str, float, float, float | None]]:
    """Each document's (or chunk's) best hit, in the hits' order (sorted best first), as the rows
    :func:`_fused` ranks. A chunk's rank is its own position: a document's place is not its chunks'."""
    best: dict[str, Hit] = {}
    for hit in hits:
        key = hit.doc if by == "doc" else hit.chunk
        if key:
            best.setdefault(key, hit)
    return [(key, hit.score, hit.weight, hit.place if by == "doc" else None) for key, hit in best.items()]


def top_chunks(hits: list[Hit], n: int, scores: Mapping[str, float]) -> list[str]:
    """The ids of a document's ``n`` best chunks among its ``hits``, by fused chunk score
    (:func:`fuse_chunks`), equal ones in the order their hits came."""
    order: dict[str, int] = {}
    for position, hit in enumerate(hits):
        if hit.chunk:
            order.setdefault(hit.chunk, position)
    return sorted(order, key=lambda c: (-scores.get(c, 0.0), order[c]))[:n]


def chunk_from(row: Mapping[str, Any], hits: list[Hit], score: float) -> ChunkHit:
    """A hydrated chunk with its fused ``score`` and the concepts that led to it."""
    chunk_id = str(row["id"].id)
    concepts: dict[str, ConceptMatch] = {}
    for hit in hits:
        if hit.chunk != chunk_id:
            continue
        for concept in hit.concepts:
            if concept.id not in concepts or concept.score > concepts[concept.id].score:
                concepts[concept.id] = concept
    ranked = sorted(concepts.values(), key=lambda c: -c.score)
    return ChunkHit(id=chunk_id, index=row["index"], content=row["content"], score=score, concepts=ranked, **placement(row))


def per_chunk(documents: list[RetrievedDocument]) -> list[RetrievedDocument]:
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
