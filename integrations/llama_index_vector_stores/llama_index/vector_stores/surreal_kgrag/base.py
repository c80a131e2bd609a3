"""``SurrealKGVectorStore``: a LlamaIndex ``BasePydanticVectorStore`` over a surreal-kgrag store.

Every operation is the core's (``surreal_kgrag.vectors.TextStore``, the same one LangChain's vector
store uses); this module translates nodes, ``VectorStoreQuery`` and ``MetadataFilters``. Each node
is stored as one document (chunked, its concepts extracted and linked, so the knowledge-graph
retrievers find it too) with its text, metadata and relationships, and reads back as the same node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from llama_index.retrievers.surreal_kgrag.filters import to_core_filter

from surreal_kgrag import IngestConfig, Scope, SurrealStore
from surreal_kgrag.embed import Embedder
from surreal_kgrag.vectors import StoredText, TextStore, open_store

#: Candidates an MMR query picks from, per result, when ``mmr_prefetch_k`` is not given.
MMR_PREFETCH_FACTOR = 4


class SurrealKGVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store on SurrealDB whose nodes are also a knowledge graph.

    >>> vector_store = SurrealKGVectorStore(db_url="surrealkv://kg")
    >>> index = VectorStoreIndex.from_vector_store(vector_store, embed_model=vector_store.embed_model)
    >>> index.as_query_engine(llm=llm, similarity_top_k=3).query("Where was Marie Curie born?")

    The store embeds with ``embedder`` (a LlamaIndex ``BaseEmbedding``, any core embedder, or None
    for MiniLM); give the index the same model (``embed_model=vector_store.embed_model``) so query
    embeddings match. ``access`` / ``filters`` (``MetadataFilters`` or a core filter dict): the
    scope every read stays in; written nodes carry ``labels`` (default: ``access``); a scoped store
    deletes only what it can read. Similarities are the cosine similarity of a node's best chunk to
    the query (-1 .. 1). Query modes: ``DEFAULT`` and ``MMR`` (``mmr_threshold`` is the lambda,
    relevance measured against the query; given on the query or, as LlamaIndex's retrievers send it,
    as the ``mmr_threshold`` keyword of ``query``, with ``mmr_prefetch_k`` or ``mmr_prefetch_factor``
    setting how many candidates it picks from).
    """

    stores_text: bool = True
    flat_metadata: bool = False

    _texts: TextStore = PrivateAttr()
    _owns_store: bool = PrivateAttr()
    _embed_model: BaseEmbedding = PrivateAttr()

    def __init__(
        self,
        db_url: str | None = None,
        *,
        store: SurrealStore | None = None,
        namespace: str | None = None,
        database: str | None = None,
        username: str | None = None,
        password: str | None = None,
        embedder: Any = None,
        extractor: Any = None,
        access: Sequence[str] | None = None,
        filters: MetadataFilters | Mapping[str, Any] | None = None,
        labels: Sequence[str] | None = None,
        ingest_config: IngestConfig | None = None,
    ) -> None:
        super().__init__(stores_text=True)
        store, self._owns_store = open_store(
            store, db_url, namespace=namespace, database=database, username=username, password=password
        )
        core_filters = to_core_filter(filters) if isinstance(filters, MetadataFilters) else filters
        self._texts = TextStore(
            store,
            embedder=embedder,
            extractor=extractor,
            scope=Scope(access=access, filters=core_filters),
            labels=labels,
            source="llama_index",
            config=ingest_config,
        )
        self._embed_model = embedder if isinstance(embedder, BaseEmbedding) else CoreEmbedding.of(self._texts.embedder)

    @classmethod
    def class_name(cls) -> str:
        return "SurrealKGVectorStore"

    @property
    def client(self) -> SurrealStore:
        return self._texts.store

    @property
    def texts(self) -> TextStore:
        """The core operations behind this store."""
        return self._texts

    @property
    def embed_model(self) -> BaseEmbedding:
        """The store's embedding model as a LlamaIndex ``BaseEmbedding``, for the index's queries."""
        return self._embed_model

    def close(self) -> None:
        """Close the store if this vector store opened it (not one passed in)."""
        if self._owns_store:
            self.client.close()

    async def aclose(self) -> None:
        if self._owns_store:
            await self.client.aclose()

    # -- writes ----------------------------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store each node as one document; returns the node ids. The store embeds each of a node's
        chunks itself (with the store's model, its title in context); a node's ``embedding``, when
        the index computed one, is checked against the store's dimension and not stored."""
        return self._texts.add(*_rows(nodes, self._texts.embedder))

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await self._texts.aadd(*_rows(nodes, self._texts.embedder))

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the source document ``ref_doc_id``."""
        self._texts.delete(None, filters={"metadata.ref_doc_id": ref_doc_id})

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await self._texts.adelete(None, filters={"metadata.ref_doc_id": ref_doc_id})

    def delete_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any) -> None:
        """Delete these nodes (or, with ``node_ids=None``, every node matching ``filters``)."""
        self._texts.delete(node_ids, filters=to_core_filter(filters))

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        await self._texts.adelete(node_ids, filters=to_core_filter(filters))

    def clear(self) -> None:
        """Delete every node in the store's scope."""
        self._texts.delete(None)

    async def aclear(self) -> None:
        await self._texts.adelete(None)

    # -- reads -----------------------------------------------------------------------------------

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """The nodes with these ids (missing ones left out); ``filters`` narrows them. With
        ``node_ids=None``, every node matching ``filters`` (which must then be given)."""
        return [_node(item) for item in self._texts.get(node_ids, filters=to_core_filter(filters))]

    async def aget_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        return [_node(item) for item in await self._texts.aget(node_ids, filters=to_core_filter(filters))]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if query.mode == VectorStoreQueryMode.MMR:
            found = self._texts.mmr(**_mmr_args(query, kwargs))
        else:
            found = self._texts.search(**_search_args(query))
        return _result(found)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if query.mode == VectorStoreQueryMode.MMR:
            found = await self._texts.ammr(**_mmr_args(query, kwargs))
        else:
            found = await self._texts.asearch(**_search_args(query))
        return _result(found)


class CoreEmbedding(BaseEmbedding):
    """A core embedder (``surreal_kgrag.embed``) as a LlamaIndex ``BaseEmbedding``; the async methods
    are the embedder's own (a batch at a time, off the event loop for a local model)."""

    _embedder: Embedder = PrivateAttr()

    @classmethod
    def of(cls, embedder: Embedder) -> CoreEmbedding:
        model = cls(model_name=embedder.name)
        model._embedder = embedder
        return model

    @classmethod
    def class_name(cls) -> str:
        return "SurrealKGCoreEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._embedder.embed_query(query)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in await self._embedder.aembed_query(query)]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._embedder.embed_documents(texts)]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in await self._embedder.aembed_documents(texts)]


def _rows(nodes: Sequence[BaseNode], embedder: Embedder) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    texts, metadatas, ids = [], [], []
    for node in nodes:
        if node.embedding is not None and len(node.embedding) != embedder.dimension:
            raise ValueError(
                f"node {node.node_id!r} has an embedding of {len(node.embedding)} numbers, but this store embeds with "
                f"{embedder.name} ({embedder.dimension} numbers), so the index's queries would not match its vectors: "
                "build the index with embed_model=vector_store.embed_model"
            )
        texts.append(node.get_content(metadata_mode=MetadataMode.NONE))
        metadatas.append(node_to_metadata_dict(node, remove_text=True, flat_metadata=False))
        ids.append(node.node_id)
    return texts, metadatas, ids


def _node(item: StoredText) -> BaseNode:
    """The node as it was added; a document ingested another way becomes a ``TextNode``."""
    if "_node_content" in item.node_storage:
        node = metadata_dict_to_node({**item.metadata, **item.node_storage}, text=item.text)
        node.id_ = item.id
        return node
    return TextNode(id_=item.id, text=item.text, metadata=dict(item.metadata))


def _result(found: list[StoredText]) -> VectorStoreQueryResult:
    return VectorStoreQueryResult(
        nodes=[_node(item) for item in found],
        similarities=[float(item.score or 0.0) for item in found],
        ids=[item.id for item in found],
    )


def _filters(query: VectorStoreQuery) -> dict[str, Any] | None:
    parts = [spec for spec in (to_core_filter(query.filters),) if spec]
    if query.doc_ids:  # an empty list restricts nothing, as in LlamaIndex's own stores
        parts.append({"metadata.ref_doc_id": {"$in": list(query.doc_ids)}})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _search_args(query: VectorStoreQuery) -> dict[str, Any]:
    if query.mode not in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.MMR):
        raise ValueError(
            f"SurrealKGVectorStore answers DEFAULT and MMR queries, not {query.mode.value!r}; for keyword and "
            "graph retrieval use llama_index.retrievers.surreal_kgrag.SurrealKGRetriever(mode='hybrid' or 'graph')"
        )
    return {
        "query": query.query_str or None,
        "embedding": query.query_embedding,
        "k": query.similarity_top_k,
        "filters": _filters(query),
        "ids": query.node_ids or None,
    }


def _mmr_args(query: VectorStoreQuery, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    args = _search_args(query)
    if args.pop("ids") is not None:
        raise ValueError("an MMR query cannot be limited to node_ids")
    if kwargs.get("mmr_prefetch_k") is not None and kwargs.get("mmr_prefetch_factor") is not None:
        raise ValueError("give mmr_prefetch_k or mmr_prefetch_factor, not both")
    factor = kwargs.get("mmr_prefetch_factor") or MMR_PREFETCH_FACTOR
    prefetch = kwargs.get("mmr_prefetch_k") or factor * query.similarity_top_k
    # index.as_retriever(vector_store_kwargs={"mmr_threshold": ...}) sends it as a keyword, not on the query
    threshold = query.mmr_threshold if query.mmr_threshold is not None else kwargs.get("mmr_threshold")
    return {**args, "fetch_k": int(prefetch), "lambda_mult": 0.5 if threshold is None else float(threshold)}
