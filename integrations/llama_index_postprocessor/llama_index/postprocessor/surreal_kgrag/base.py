"""Core rerankers as LlamaIndex node postprocessors.

A surreal-kgrag reranker ranks *documents* (``rerank(query, documents, *, k, query_embedding=None)``
on ``RetrievedDocument``s). The postprocessor groups the nodes by their source document, reranks
those documents, and returns the nodes of the ``top_n`` best documents in the new order, each scored
with its document's new score.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.retrievers.surreal_kgrag.base import BOOKKEEPING_KEYS

from surreal_kgrag import ChunkHit, RetrievedDocument


class SurrealKGRerankPostprocessor(BaseNodePostprocessor):
    """Reranks nodes by document with a surreal-kgrag reranker (sync ``rerank``; async ``arerank``,
    or ``rerank`` in a worker thread when the reranker has no ``arerank``)."""

    reranker: Any = Field(description="an object with rerank(query, documents, *, k, query_embedding=None)", exclude=True)
    top_n: int | None = Field(None, ge=1, description="documents kept (default: all)")

    @classmethod
    def class_name(cls) -> str:
        return "SurrealKGRerankPostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = _query(query_bundle)
        documents, groups = nodes_to_documents(nodes)
        if not documents:
            return []
        ranked = self.reranker.rerank(
            query.query_str, documents, k=self.top_n or len(documents), query_embedding=query.embedding
        )
        return _regroup(ranked, groups)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        documents, groups = nodes_to_documents(nodes)
        if not documents:
            return []
        options = {"k": self.top_n or len(documents), "query_embedding": query.embedding}
        arerank = getattr(self.reranker, "arerank", None)
        if arerank is not None:
            ranked = await arerank(query.query_str, documents, **options)
        else:  # a reranker with rerank alone (what the core's retrievers accept too) runs in a worker thread
            ranked = await asyncio.to_thread(self.reranker.rerank, query.query_str, documents, **options)
        return _regroup(ranked, groups)


def nodes_to_documents(nodes: list[NodeWithScore]) -> tuple[list[RetrievedDocument], dict[str, list[NodeWithScore]]]:
    """Group nodes by source document (``ref_doc_id``, else the node's own id), first-seen order."""
    groups: dict[str, list[NodeWithScore]] = {}
    for item in nodes:
        groups.setdefault(item.node.ref_doc_id or item.node.node_id, []).append(item)
    documents = []
    for key, items in groups.items():
        metadata = items[0].node.metadata
        chunks = [
            ChunkHit(
                id=item.node.node_id,
                index=int(item.node.metadata.get("chunk_index", 0)),
                content=item.node.get_content(),
                score=item.score or 0.0,
            )
            for item in items
        ]
        documents.append(
            RetrievedDocument(
                id=key,
                title=metadata.get("title"),
                source=metadata.get("source") or "",
                metadata={k: v for k, v in metadata.items() if k not in BOOKKEEPING_KEYS and k not in ("title", "source")},
                score=float(metadata.get("document_score", max(chunk.score for chunk in chunks))),
                chunks=chunks,
            )
        )
    return documents, groups


def _regroup(ranked: list[RetrievedDocument], groups: dict[str, list[NodeWithScore]]) -> list[NodeWithScore]:
    return [NodeWithScore(node=item.node, score=doc.score) for doc in ranked for item in groups[doc.id]]


def _query(query_bundle: QueryBundle | None) -> QueryBundle:
    if query_bundle is None:
        raise ValueError("reranking needs the query: pass query_bundle or query_str to postprocess_nodes")
    return query_bundle
