"""``SurrealKGRetriever``: a LlamaIndex retriever over a surreal-kgrag store.

All retrieval logic is the core's (``surreal_kgrag.retrieve``); this module translates its typed
results into LlamaIndex nodes. ``k`` counts *documents*, as in the core; each document contributes
its best matching chunks as ``TextNode``s (at most ``max_chunks_per_document``), so a query returns
up to ``k * max_chunks_per_document`` nodes, grouped by document rank, best chunk first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import (
    BaseNode,
    NodeRelationship,
    NodeWithScore,
    ObjectType,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from surrealdb import RecordID

from surreal_kgrag import ChunkHit, IngestConfig, IngestSummary, RetrievalResult, RetrievedDocument, Scope
from surreal_kgrag.lazy import LazyRetriever
from surreal_kgrag.retrieval import BaseRetriever as CoreRetriever
from surreal_kgrag.store import checked_int
from surreal_kgrag.surql import CompiledFilter

# Node metadata the retriever adds; kept out of the text the LLM and embedders see, except title and source.
BOOKKEEPING_KEYS = ["document_id", "document_score", "chunk_index", "concepts", "mode"]


class SurrealKGRetriever(BaseRetriever):
    """Knowledge-graph retrieval from SurrealDB as a LlamaIndex retriever.

    >>> retriever = SurrealKGRetriever(db_url="surrealkv://kg", mode="concept", k=4)
    >>> engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

    Each ``NodeWithScore`` holds one chunk: ``node.id_`` is the chunk id, ``score`` the chunk's score,
    ``metadata`` the document's metadata plus ``document_id``, ``title``, ``source``,
    ``document_score``, ``chunk_index``, ``concepts`` (names that led to the chunk) and ``mode``;
    ``relationships`` has ``SOURCE`` (the document, so ``ref_doc_id`` works) and ``PREVIOUS`` /
    ``NEXT`` chunk ids when those chunks exist (``neighbours=True`` costs one small query per call).
    When the ``QueryBundle`` carries an ``embedding``, it is used instead of embedding the query
    text; it must come from the same model the store was built with. ``access`` (labels) and
    ``filters`` bound everything it reads (see ``surreal_kgrag.Scope``).
    """

    def __init__(
        self,
        db_url: str | None = None,
        *,
        mode: str = "hybrid",
        k: int = 4,
        namespace: str | None = None,
        database: str | None = None,
        username: str | None = None,
        password: str | None = None,
        embedder: Any = None,
        filters: Any = None,
        access: list[str] | None = None,
        reranker: Any = None,
        retriever_options: dict[str, Any] | None = None,
        max_chunks_per_document: int = 3,
        neighbours: bool = True,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.mode = mode
        self.k = checked_int("k", k, maximum=1000)
        self.max_chunks_per_document = checked_int("max_chunks_per_document", max_chunks_per_document)
        self.neighbours = neighbours
        self.scope = Scope(access=access, filters=filters)
        self._lazy = LazyRetriever(
            mode,
            url=db_url,
            namespace=namespace,
            database=database,
            username=username,
            password=password,
            embedder=embedder,
            k=self.k,
            filters=filters,
            access=access,
            reranker=reranker,
            options=retriever_options,
        )

    @classmethod
    def from_retriever(cls, retriever: CoreRetriever, **kwargs: Any) -> SurrealKGRetriever:
        """Wrap a core retriever (its store, mode, embedder and ``k``); the caller keeps owning the store."""
        kwargs.setdefault("k", retriever.config.k)
        instance = cls(mode=retriever.mode, **kwargs)
        instance._lazy = LazyRetriever.wrap(retriever)
        return instance

    @property
    def core(self) -> CoreRetriever:
        """The core retriever, built (with its store) on first use: the constructor never connects."""
        return self._lazy.retriever

    # -- retrieval -------------------------------------------------------------------------------

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.core.search(query_bundle.query_str, **self._search_args(query_bundle))
        counts = self._chunk_counts(result)
        return self._to_nodes(result, counts)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self.core.asearch(query_bundle.query_str, **self._search_args(query_bundle))
        counts = await self._achunk_counts(result)
        return self._to_nodes(result, counts)

    def _search_args(self, query_bundle: QueryBundle) -> dict[str, Any]:
        # Already the built retriever's scope; a wrapped one (from_retriever) is narrowed to it.
        args: dict[str, Any] = {"k": self.k, "scope": self.scope}
        if query_bundle.embedding is not None:
            args["embedding"] = list(query_bundle.embedding)
        return args

    def _chunk_count_params(self, result: RetrievalResult) -> dict[str, Any] | None:
        if not self.neighbours or not result.documents:
            return None
        return {"ids": [RecordID("document", doc.id) for doc in result.documents], **self._scope().params}

    def _scope(self) -> CompiledFilter:
        return self.core.scope.narrow(self.scope).compile()

    def _chunk_counts(self, result: RetrievalResult) -> dict[str, int]:
        params = self._chunk_count_params(result)
        if not params:
            return {}
        return _counts(self.core.store.query("document_chunk_counts", params, filter=self._scope())[-1])

    async def _achunk_counts(self, result: RetrievalResult) -> dict[str, int]:
        params = self._chunk_count_params(result)
        if not params:
            return {}
        return _counts((await self.core.store.aquery("document_chunk_counts", params, filter=self._scope()))[-1])

    def _to_nodes(self, result: RetrievalResult, chunk_counts: dict[str, int]) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=chunk_node(doc, chunk, result.mode, chunk_counts.get(doc.id)), score=chunk.score)
            for doc in result.documents
            for chunk in doc.chunks[: self.max_chunks_per_document]
        ]

    # -- ingestion and lifecycle ------------------------------------------------------------------

    def add_documents(
        self, documents: Iterable[BaseNode], *, extractor: Any = None, config: IngestConfig | None = None
    ) -> IngestSummary:
        """Ingest LlamaIndex ``Document``s (or ``TextNode``s) into this retriever's store with its embedder.

        The key is ``doc_id``; LlamaIndex makes up a random one when none is given, so set ``doc_id``
        (``SimpleDirectoryReader(filename_as_id=True)`` does) to make re-ingestion update in place.
        """
        return self._lazy.ingestor(extractor, config).ingest(list(documents))

    async def aadd_documents(
        self, documents: Iterable[BaseNode], *, extractor: Any = None, config: IngestConfig | None = None
    ) -> IngestSummary:
        return await self._lazy.ingestor(extractor, config).aingest(list(documents))

    def close(self) -> None:
        """Close the store if this retriever opened it (not one given through ``from_retriever``)."""
        self._lazy.close()

    async def aclose(self) -> None:
        await self._lazy.aclose()


def chunk_node(doc: RetrievedDocument, chunk: ChunkHit, mode: str, chunk_count: int | None = None) -> TextNode:
    """A ``TextNode`` for one retrieved chunk, related to its document and, when known, its neighbours."""
    metadata = {
        **doc.metadata,
        "document_id": doc.id,
        "title": doc.title,
        "source": doc.source,
        "document_score": doc.score,
        "chunk_index": chunk.index,
        "concepts": [concept.name for concept in chunk.concepts],
        "mode": mode,
    }
    relationships = {
        NodeRelationship.SOURCE: RelatedNodeInfo(
            node_id=doc.id, node_type=ObjectType.DOCUMENT, metadata={"title": doc.title, "source": doc.source}
        )
    }
    # Chunk ids are "<document key>::<hash12>::<index:05d>" and indexes run 0 .. chunk_count - 1.
    prefix = chunk.id.rsplit("::", 1)[0]
    if chunk.index > 0:
        relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=f"{prefix}::{chunk.index - 1:05d}", node_type=ObjectType.TEXT)
    if chunk_count is not None and chunk.index + 1 < chunk_count:
        relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=f"{prefix}::{chunk.index + 1:05d}", node_type=ObjectType.TEXT)
    return TextNode(
        id_=chunk.id,
        text=chunk.content,
        metadata=metadata,
        relationships=relationships,
        excluded_llm_metadata_keys=list(BOOKKEEPING_KEYS),
        excluded_embed_metadata_keys=[*BOOKKEEPING_KEYS, "title", "source"],
    )


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {str(row["id"].id): int(row["chunk_count"]) for row in rows}
