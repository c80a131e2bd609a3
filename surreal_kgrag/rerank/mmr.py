"""Maximal marginal relevance over the stored embeddings of each document's best chunk."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..db import SurrealStore
from ..db.sdk import RecordID
from ..embed import Embedder, resolve_embedder
from ..errors import KGRagError
from ..retrieval import RetrievedDocument, Scope
from .base import Ranking, RankingReranker, StoreReader, best_chunk, fraction, store_scope


def maximal_marginal_relevance(query_vector: np.ndarray, vectors: np.ndarray, lambda_mult: float) -> Ranking:
    """Greedy MMR over all rows of ``vectors``; returns every row with the MMR value it was picked at.

    Each step picks ``argmax lambda * sim(query, d) - (1 - lambda) * max sim(d, picked)`` (cosine
    similarities). Negative similarities to picked rows count as no redundancy, so the values are
    non-increasing: a valid score order. Ties go to the earlier row.
    """
    query = _unit(np.asarray(query_vector, dtype=np.float32)[None, :])[0]
    rows = _unit(np.asarray(vectors, dtype=np.float32))
    relevance = rows @ query
    similarity = rows @ rows.T
    redundancy = np.zeros(len(rows), dtype=np.float32)
    available = np.ones(len(rows), dtype=bool)
    ranking: Ranking = []
    for _ in range(len(rows)):
        values = lambda_mult * relevance - (1.0 - lambda_mult) * redundancy
        pick = int(np.argmax(np.where(available, values, -np.inf)))
        ranking.append((pick, float(values[pick])))
        available[pick] = False
        redundancy = np.maximum(redundancy, similarity[pick])
    return ranking


def _unit(array: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)



class MMRReranker(StoreReader, RankingReranker):
    """Maximal marginal relevance: relevant to the query, different from what is already picked.

    Relevance is the cosine similarity of the query embedding (``query_embedding``, else the
    ``embedder``'s embedding of the query) to the stored embedding of each document's best chunk;
    redundancy is the similarity between those chunk embeddings, fetched in one query.
    ``lambda_mult=1`` ranks by relevance alone, ``0`` by diversity alone. Scores become the MMR value.
    Use the embedder the store was built with. Embeddings are read within ``scope`` (and the scope
    of the search the reranker serves): a chunk outside it is treated as absent.
    """

    def __init__(
        self, store: SurrealStore, embedder: Embedder | Any = None, lambda_mult: float = 0.5, scope: Scope | None = None
    ) -> None:
        self.store = store
        self.embedder = resolve_embedder(embedder)
        self.lambda_mult = fraction("lambda_mult", lambda_mult)
        self.scope = store_scope(store, scope)

    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking:
        if query_embedding is None:
            query_embedding = self.embedder.embed_query(query)
        rows = self._query("chunk_embeddings", _best_chunk_ids(documents))
        return self._select(query_embedding, documents, rows)

    async def _arank(
        self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None
    ) -> Ranking:
        if query_embedding is None:
            query_embedding = await self.embedder.aembed_query(query)
        rows = await self._aquery("chunk_embeddings", _best_chunk_ids(documents))
        return self._select(query_embedding, documents, rows)

    def _select(self, query_embedding: np.ndarray, documents: list[RetrievedDocument], rows: list[dict[str, Any]]) -> Ranking:
        stored = {row["id"].id: row["embedding"] for row in rows}
        vectors = []
        for doc in documents:
            chunk_id = best_chunk(doc).id
            if chunk_id not in stored:
                raise KGRagError(
                    f"chunk {chunk_id!r} of document {doc.id!r} is not in the store (re-ingested or deleted "
                    "since it was retrieved); search again before reranking"
                )
            vectors.append(stored[chunk_id])
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.shape[1] != len(query_embedding):
            raise KGRagError(
                f"the query embedding has {len(query_embedding)} dimensions but the stored chunks have "
                f"{matrix.shape[1]}; give MMRReranker the embedder the store was built with"
            )
        return maximal_marginal_relevance(query_embedding, matrix, self.lambda_mult)

    def __repr__(self) -> str:
        return f"MMRReranker(lambda_mult={self.lambda_mult})"



def _best_chunk_ids(documents: list[RetrievedDocument]) -> list[RecordID]:
    return [RecordID("chunk", best_chunk(doc).id) for doc in documents]
