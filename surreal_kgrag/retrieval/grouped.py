"""The two published query patterns (chunk KNN, concept KNN walked to chunks): one query returns
rows already grouped by document, shaped here into ``RetrievedDocument``s."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from .base import BaseRetriever, Pool, Request
from .fusion import per_chunk
from .plan import Compute, Plan, Query
from .results import HYDRATE, Channel, ChunkHit, ConceptMatch, ProvenancePath, RetrievedDocument, placement


class GroupedRetriever(BaseRetriever):
    """Runs ``query_file`` and aggregates its per-document rows (``aggregate``, ``group_by``)."""

    query_file: str

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
        pool = Pool(request, self._candidates(request), exact_scan=self.filtered_chunk_knn, threshold=self.config.threshold)
        documents: list[RetrievedDocument] = []
        while pool.size is not None:
            placeholders = self._knn_placeholders(request, pool.size)
            out = (yield Query(self.query_file, {**params, "exact": pool.exact}, placeholders))[-1]
            if not pool.read(out, out["fetched"]):
                continue
            documents = yield Compute(partial(self._documents, out["documents"]), HYDRATE)
            pool.grow(len(documents), out["fetched"], out["lowest"])
        return documents[: request.fetch]

    def _documents(self, rows: list[dict[str, Any]]) -> list[RetrievedDocument]:
        """The query's per-document rows as results, best first (one per chunk with ``group_by='chunk'``)."""
        documents = sorted((_document(row, self.config.aggregate) for row in rows), key=lambda d: -d.score)
        return per_chunk(documents) if self.config.group_by == "chunk" else documents


def _document(row: Mapping[str, Any], aggregate: str) -> RetrievedDocument:
    chunks = sorted((_chunk(c) for c in row["chunks"]), key=lambda c: -c.score)
    doc_id = str(row["id"].id)
    score = {"max": row["score"], "mean": row.get("mean", row["score"]), "count": row.get("hits", len(chunks))}[aggregate]
    channel: Channel = "concept" if any(c.concepts for c in chunks) else "vector"
    provenance = [
        ProvenancePath(
            channel=channel,
            score=concept.score if chunk.concepts else chunk.score,
            document_id=doc_id,
            chunk_id=chunk.id,
            concept=concept,
        )
        for chunk in chunks
        for concept in (chunk.concepts or [None])  # type: ignore[list-item]
    ]
    return RetrievedDocument(
        id=doc_id,
        title=row.get("title"),
        source=row.get("source") or "",
        metadata=row.get("metadata") or {},
        chunk_count=row.get("chunk_count"),
        score=float(score),
        chunks=chunks,
        provenance=provenance,
    )


def _chunk(row: Mapping[str, Any]) -> ChunkHit:
    concepts = [
        ConceptMatch(id=str(c["id"].id), name=c["name"], score=float(c["score"]))
        for c in sorted(row.get("concepts") or [], key=lambda c: -c["score"])
    ]
    return ChunkHit(
        id=str(row["id"].id), index=row["index"], content=row["content"], score=float(row["score"]), concepts=concepts, **placement(row)
    )
