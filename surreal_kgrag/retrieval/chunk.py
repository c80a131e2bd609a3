"""Direct chunk retrieval: the nearest chunk embeddings, grouped by document in one query."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, ClassVar

from .base import BaseRetriever
from .config import ChunkConfig, RetrieverConfig
from .fusion import per_chunk
from .plan import Compute, Plan, Query
from .pool import Pool
from .request import Request
from .results import HYDRATE, ChunkHit, ProvenancePath, RetrievedDocument, placement


class ChunkRetriever(BaseRetriever):
    """Direct chunk retrieval: nearest chunk embeddings, grouped by document (``search_chunks.surql``)
    and scored by ``aggregate``."""

    mode = "chunk"
    config_class: ClassVar[type[RetrieverConfig]] = ChunkConfig
    config: ChunkConfig
    default_candidates = 20

    def _plan(self, request: Request) -> Plan[list[RetrievedDocument]]:
        limit = request.fetch if self.config.aggregate == "max" and self.config.group_by == "document" else 10_000
        yield from self.embedded(request)
        params = {
            "embedding": request.vector,
            "threshold": self.config.threshold,
            "limit": limit,
            "filtered": bool(request.filter.condition),
            **request.filter.params,
        }
        passing = yield from self._passing(request)
        pool = Pool(request, self._candidates(request), threshold=self.config.threshold, dense=self._dense, passing=passing)
        documents: list[RetrievedDocument] = []
        while pool.size is not None:
            placeholders = self._knn_placeholders(request, pool.size)
            out = (yield Query("search_chunks", params | pool.params(), placeholders))[-1]
            if not pool.read(out, out["fetched"]):
                continue
            documents = yield Compute(partial(self._documents, out["documents"]), HYDRATE)
            keys = [d.id for d in documents] if self.config.group_by == "document" else None
            pool.grow(len(documents), out["fetched"], out["lowest"], keys)
        return documents[: request.fetch]

    def _documents(self, rows: list[dict[str, Any]]) -> list[RetrievedDocument]:
        """The query's per-document rows as results, best first, equal ones by key (one per chunk with
        ``group_by='chunk'``)."""
        documents = sorted((_document(row, self.config.aggregate) for row in rows), key=lambda d: (-d.score, d.id))
        return per_chunk(documents) if self.config.group_by == "chunk" else documents


def _document(row: Mapping[str, Any], aggregate: str) -> RetrievedDocument:
    chunks = sorted((_chunk(c) for c in row["chunks"]), key=lambda c: -c.score)
    doc_id = str(row["id"].id)
    score = {"max": row["score"], "mean": row["mean"], "count": row["hits"]}[aggregate]
    return RetrievedDocument(
        id=doc_id,
        title=row.get("title"),
        source=row.get("source") or "",
        metadata=row.get("metadata") or {},
        chunk_count=row.get("chunk_count"),
        score=float(score),
        chunks=chunks,
        provenance=[ProvenancePath(channel="vector", score=c.score, document_id=doc_id, chunk_id=c.id) for c in chunks],
    )


def _chunk(row: Mapping[str, Any]) -> ChunkHit:
    return ChunkHit(id=str(row["id"].id), index=row["index"], content=row["content"], score=float(row["score"]), **placement(row))
