"""Boost documents whose chunks mention the concepts of the query."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from ..db import SurrealStore
from ..db.sdk import RecordID
from ..extract import ConceptExtractor, normalise_concept, resolve_extractor
from ..retrieval import RetrievedDocument, Scope
from .base import Ranking, RankingReranker, StoreReader, by_score, fraction, store_scope


class ConceptOverlapReranker(StoreReader, RankingReranker):
    """Boosts documents whose retrieved chunks mention the concepts found in the query.

    The query's concepts come from ``extractor`` (default: the spaCy extractor) with the names
    normalised as at ingest; each document's concepts are those its chunks in the result mention
    (``MENTIONS_CONCEPT`` edges, one query). Score = ``(1 - weight) * min-max normalised input score
    + weight * fraction of the query's concepts the document mentions``; ties keep the input order.
    A query with no concepts leaves the order unchanged. Chunks are read within ``scope`` (and the
    scope of the search the reranker serves).
    """

    def __init__(
        self, store: SurrealStore, extractor: ConceptExtractor | Any = None, weight: float = 0.5, scope: Scope | None = None
    ) -> None:
        self.store = store
        self.extractor = resolve_extractor(extractor)
        self.weight = fraction("weight", weight)
        self.scope = store_scope(store, scope)

    def query_concepts(self, query: str) -> list[str]:
        """The normalised concept names of the query, in order of first mention."""
        names = (normalise_concept(m.name, keep_numeric=True) for m in self.extractor.extract([query])[0])
        return list(dict.fromkeys(name for name in names if name))

    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking:
        wanted = self.query_concepts(query)
        rows = self._query("chunk_concepts", _chunk_ids(documents)) if wanted else []
        return self._combine(documents, wanted, rows)

    async def _arank(
        self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None
    ) -> Ranking:
        wanted = await asyncio.to_thread(self.query_concepts, query)
        rows = await self._aquery("chunk_concepts", _chunk_ids(documents)) if wanted else []
        return self._combine(documents, wanted, rows)

    def _combine(self, documents: list[RetrievedDocument], wanted: list[str], rows: list[dict[str, Any]]) -> Ranking:
        mentioned = {row["id"].id: set(row["concepts"] or ()) for row in rows}
        scores = np.array([doc.score for doc in documents], dtype=np.float64)
        spread = scores.max() - scores.min()
        normalised = (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
        combined = []
        for doc, base in zip(documents, normalised):
            concepts = set().union(*(mentioned.get(chunk.id, set()) for chunk in doc.chunks))
            overlap = len(concepts.intersection(wanted)) / len(wanted) if wanted else 0.0
            combined.append((1.0 - self.weight) * base + self.weight * overlap)
        return by_score(combined)

    def __repr__(self) -> str:
        return f"ConceptOverlapReranker(weight={self.weight})"


def _chunk_ids(documents: list[RetrievedDocument]) -> list[RecordID]:
    ids = dict.fromkeys(chunk.id for doc in documents for chunk in doc.chunks)
    return [RecordID("chunk", chunk_id) for chunk_id in ids]
