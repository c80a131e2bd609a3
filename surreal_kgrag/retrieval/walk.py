"""Graph algorithms of the graph and concept modes: the bounded subgraph as arrays, Personalized
PageRank over it, and the question-concept weights that personalise the walk.

The subgraph (``graph_subgraph.surql``, or ``graph_subgraph_scoped.surql`` from the edges) is
bipartite: chunks and concepts joined by ``MENTIONS_CONCEPT`` edges, plus, when the LLM layer wrote
them, ``RELATES_TO`` concept pairs. The walk moves along directed, weighted transitions:

- chunk -> concept: weight ``idf ** gamma`` (rare concepts say more), times ``np_weight`` for a concept
  the chunk names only as a noun phrase; never back to the chunk's own title (``own`` edges), so the
  walk leaves a document through the names it mentions;
- concept -> chunk: a concept that names documents (a title or alias) sends ``own_share`` of its mass
  to those documents' chunks and the rest to the chunks that mention it (bridges); other concepts
  spread evenly over their chunks; a concept with ``RELATES_TO`` pairs sends ``relation_share`` to
  its related concepts;
- with probability ``1 - damping`` the walk restarts at the question's concepts (weighted by match
  quality and rarity) and at the dense seed chunks (softmax of their similarity).

A document scores the sum of its chunks' visit probabilities. Everything is numpy over edge lists:
a few hundred nodes and a thousand edges cost well under a millisecond per iteration.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ids import chunk_document_key


@dataclass
class Subgraph:
    """Chunks and concepts as positions, edges as arrays of positions."""

    chunks: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)  # per chunk
    concepts: list[str] = field(default_factory=list)
    edge_chunk: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edge_concept: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edge_own: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    edge_np: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    relation_from: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    relation_to: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    chunk_pos: dict[str, int] = field(default_factory=dict)
    concept_pos: dict[str, int] = field(default_factory=dict)

    def chunk(self, key: str, doc: str | None = None) -> int:
        pos = self.chunk_pos.get(key)
        if pos is None:
            pos = self.chunk_pos[key] = len(self.chunks)
            self.chunks.append(key)
            self.docs.append(doc if doc is not None else chunk_document_key(key))
        return pos

    def concept(self, key: str) -> int:
        pos = self.concept_pos.get(key)
        if pos is None:
            pos = self.concept_pos[key] = len(self.concepts)
            self.concepts.append(key)
        return pos


def edges(out: Mapping[str, Any]) -> Iterator[tuple[str, str, bool, bool]]:
    """The (chunk, concept, own, np) edges of a subgraph answer: listed one by one
    (``graph_subgraph_scoped.surql``) or as the adjacency lists they were read from
    (``graph_subgraph.surql``)."""
    for chunk, concept, own, np_only in out.get("edges") or ():
        yield chunk, concept, bool(own), bool(np_only)
    for chunk, concepts, own, np_only in out.get("seeds") or ():
        owned, noun_phrases = set(own), set(np_only)
        for concept in concepts:
            yield chunk, concept, concept in owned, concept in noun_phrases
    lists = [row[:2] for row in out.get("named") or ()]
    lists += [(row[0], row[2]) for row in (out.get("counts") or []) + (out.get("related_counts") or []) if len(row) > 2]
    for concept, chunks in lists:
        for chunk, own, np_only in chunks or ():
            yield chunk, concept, bool(own), bool(np_only)


def assemble(out: Mapping[str, Any], extra_chunks: Sequence[tuple[str, str]] = ()) -> Subgraph:
    """The subgraph from a subgraph query's answer; ``extra_chunks`` (chunk, doc) join as nodes."""
    sub = Subgraph()
    for chunk, doc, _ in out["knn"]:
        sub.chunk(chunk, doc)
    for chunk, doc in extra_chunks:
        sub.chunk(chunk, doc)
    pairs: dict[tuple[int, int], list[bool]] = {}
    for chunk, concept, own, np_only in edges(out):
        key = (sub.chunk(chunk), sub.concept(concept))
        flags = pairs.setdefault(key, [False, True])
        flags[0] = flags[0] or own
        flags[1] = flags[1] and np_only
    if pairs:
        keys = np.array(list(pairs), dtype=np.int64)
        marks = np.array(list(pairs.values()), dtype=bool)
        sub.edge_chunk, sub.edge_concept = keys[:, 0], keys[:, 1]
        sub.edge_own, sub.edge_np = marks[:, 0], marks[:, 1]
    related = [
        (sub.concept_pos[a], sub.concept_pos[b])
        for a, b, *_ in out.get("relations") or []
        if a in sub.concept_pos and b in sub.concept_pos and a != b
    ]
    if related:
        both = np.array(related + [(b, a) for a, b in related], dtype=np.int64)  # a relation is walked both ways
        sub.relation_from, sub.relation_to = both[:, 0], both[:, 1]
    return sub


def idf(counts: np.ndarray, total: int) -> np.ndarray:
    """Rarity in [0, 1]: ``ln(1 + N / n) / ln(1 + N)`` for a concept in ``n`` of ``N`` chunks."""
    total = max(int(total), 1)
    return np.log1p(total / np.maximum(counts, 1)) / math.log1p(total)


@dataclass(frozen=True)
class WalkSettings:
    damping: float
    iterations: int
    own_share: float
    np_weight: float
    gamma: float
    relation_share: float


def personalized_pagerank(
    sub: Subgraph,
    rarity: np.ndarray,
    concept_reset: Mapping[int, float],
    chunk_reset: Mapping[int, float],
    settings: WalkSettings,
) -> np.ndarray:
    """Visit probability of each chunk of ``sub`` (position order). ``rarity`` is per concept;
    the resets are unnormalised weights by position."""
    nc, nk = len(sub.chunks), len(sub.concepts)
    rc, rk = np.zeros(nc), np.zeros(nk)
    for pos, weight in chunk_reset.items():
        rc[pos] += weight
    for pos, weight in concept_reset.items():
        rk[pos] += weight
    total = rc.sum() + rk.sum()
    if total <= 0 or nc == 0:
        return np.zeros(nc)
    rc, rk = rc / total, rk / total
    ec, ek, own = sub.edge_chunk, sub.edge_concept, sub.edge_own
    # chunk -> concept
    w = rarity[ek] ** settings.gamma * np.where(sub.edge_np, settings.np_weight, 1.0) * ~own
    out_sum = np.bincount(ec, weights=w, minlength=nc)
    to_concept = np.divide(w, out_sum[ec], out=np.zeros_like(w), where=out_sum[ec] > 0)
    # concept -> chunk: own documents' chunks vs the chunks that mention the concept
    n_own = np.bincount(ek, weights=own.astype(float), minlength=nk)
    n_other = np.bincount(ek, weights=(~own).astype(float), minlength=nk)
    a_own = np.where(n_other > 0, np.where(n_own > 0, settings.own_share, 0.0), 1.0)
    has_relations = np.zeros(nk, dtype=bool)
    if len(sub.relation_from):
        has_relations[sub.relation_from] = True
        keep = np.where(has_relations, 1.0 - settings.relation_share, 1.0)
    else:
        keep = np.ones(nk)
    to_chunk = keep[ek] * np.where(
        own, a_own[ek] / np.maximum(n_own[ek], 1), (1.0 - a_own[ek]) / np.maximum(n_other[ek], 1)
    )
    if len(sub.relation_from):
        fan = np.bincount(sub.relation_from, minlength=nk)
        to_related = settings.relation_share / fan[sub.relation_from]
    xc, xk = rc.copy(), rk.copy()
    d = settings.damping
    for _ in range(settings.iterations):
        into_chunks = np.bincount(ec, weights=to_chunk * xk[ek], minlength=nc)
        into_concepts = np.bincount(ek, weights=to_concept * xc[ec], minlength=nk)
        if len(sub.relation_from):
            into_concepts += np.bincount(sub.relation_to, weights=to_related * xk[sub.relation_from], minlength=nk)
        xc, xk = (1 - d) * rc + d * into_chunks, (1 - d) * rk + d * into_concepts
    return xc


def dense_reset(scores: Sequence[float], temperature: float) -> np.ndarray:
    """Softmax weights of the dense seed chunks (their similarities to the question)."""
    s = np.asarray(scores, dtype=float)
    if len(s) == 0:
        return s
    e = np.exp((s - s.max()) / max(temperature, 1e-6))
    return e / e.sum()
