"""``SurrealKGRetriever``: a LlamaIndex retriever over a surreal-kgrag store.

All retrieval logic is the core's (``surreal_kgrag.retrieval``); this module translates its typed
results into LlamaIndex nodes. ``similarity_top_k`` counts *nodes* (chunks), as in LlamaIndex: the
core ranks that many documents, each offers its best chunks (at most ``max_chunks_per_document``),
and the ``similarity_top_k`` best of those chunks by score come back, best first.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
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
from llama_index.core.vector_stores.types import MetadataFilters

from surreal_kgrag import ChunkHit, IngestConfig, IngestSummary, RetrievalResult, RetrievedDocument, Scope
from surreal_kgrag.db import checked_int
from surreal_kgrag.lazy import LazyRetriever
from surreal_kgrag.retrieval import BaseRetriever as CoreRetriever
from surreal_kgrag.retrieval.config import DEFAULT_MODE

from .filters import to_core_filter

# Node metadata the retriever adds; kept out of the text the LLM and embedders see, except title and source.
DEFAULT_TOP_K = 4

BOOKKEEPING_KEYS = ["document_id", "document_score", "chunk_index", "concepts", "mode"]
# The ids of the document a node the vector store wrote came from (``node_to_metadata_dict``): kept
# in a chunk's metadata, out of the text the LLM and embedders see. The serialised node itself is the
# core's ``RetrievedDocument.node_storage``, never metadata.
NODE_SOURCE_KEYS = ["doc_id", "ref_doc_id"]


class SurrealKGRetriever(BaseRetriever):
    """Knowledge-graph retrieval from SurrealDB as a LlamaIndex retriever.

    >>> retriever = SurrealKGRetriever.from_defaults(db_url="surrealkv://kg", mode="concept", similarity_top_k=4)
    >>> engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

    Each ``NodeWithScore`` holds one chunk: ``node.id_`` is the chunk id, ``score`` the chunk's score,
    ``metadata`` the document's metadata plus ``document_id``, ``title``, ``source``,
    ``document_score``, ``chunk_index``, ``concepts`` (names that led to the chunk) and ``mode``;
    ``relationships`` has ``SOURCE`` (the document, so ``ref_doc_id`` works) and ``PREVIOUS`` /
    ``NEXT`` chunk ids when those chunks exist (read in the search query itself, no extra round trip).
    When the ``QueryBundle`` carries an ``embedding``, it is used instead of embedding the query
    text; it must come from the same model the store was built with. ``access`` (labels) and
    ``filters`` (LlamaIndex ``MetadataFilters`` on metadata keys, or a core filter dict) bound
    everything it reads (see ``surreal_kgrag.Scope``). ``k`` is a deprecated alias of
    ``similarity_top_k``.
    """

    def __init__(
        self,
        db_url: str | None = None,
        *,
        mode: str = DEFAULT_MODE,
        similarity_top_k: int | None = None,
        namespace: str | None = None,
        database: str | None = None,
        username: str | None = None,
        password: str | None = None,
        embedder: Any = None,
        filters: MetadataFilters | Mapping[str, Any] | None = None,
        access: list[str] | None = None,
        reranker: Any = None,
        retriever_options: dict[str, Any] | None = None,
        max_chunks_per_document: int = 3,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        k: int | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        if k is not None:
            warnings.warn("SurrealKGRetriever(k=...) is deprecated: use similarity_top_k", DeprecationWarning, stacklevel=2)
            if similarity_top_k is not None and similarity_top_k != k:
                raise ValueError(f"give similarity_top_k ({similarity_top_k}) or its deprecated alias k ({k}), not both")
            similarity_top_k = k
        self.mode = mode
        top_k = DEFAULT_TOP_K if similarity_top_k is None else similarity_top_k
        self.similarity_top_k = checked_int("similarity_top_k", top_k, maximum=1000)
        self.max_chunks_per_document = checked_int("max_chunks_per_document", max_chunks_per_document)
        core_filters = to_core_filter(filters) if isinstance(filters, MetadataFilters) else filters
        self.scope = Scope(access=access, filters=core_filters)
        self._lazy = LazyRetriever(
            mode,
            url=db_url,
            namespace=namespace,
            database=database,
            username=username,
            password=password,
            embedder=embedder,
            k=self.similarity_top_k,
            reranker=reranker,
            options=retriever_options,
        )

    @classmethod
    def from_defaults(
        cls,
        db_url: str | None = None,
        *,
        mode: str = DEFAULT_MODE,
        similarity_top_k: int = 4,
        filters: MetadataFilters | Mapping[str, Any] | None = None,
        access: list[str] | None = None,
        embedder: Any = None,
        **kwargs: Any,
    ) -> SurrealKGRetriever:
        """The LlamaIndex way to build one: every argument of the constructor, ``similarity_top_k`` 4."""
        return cls(db_url, mode=mode, similarity_top_k=similarity_top_k, filters=filters, access=access, embedder=embedder, **kwargs)

    @classmethod
    def from_retriever(cls, retriever: CoreRetriever, **kwargs: Any) -> SurrealKGRetriever:
        """Wrap a core retriever (its store, mode, embedder and ``k``); the caller keeps owning the
        store. ``access`` / ``filters`` given here narrow its scope; store settings are refused."""
        core_settings = {"db_url", "namespace", "database", "username", "password", "embedder", "retriever_options", "reranker"}
        refused = sorted(set(kwargs) & core_settings)
        if refused:
            raise TypeError(f"from_retriever() uses the core retriever's own settings; remove {refused}")
        if "k" not in kwargs:  # the deprecated alias, when given, sets it
            kwargs.setdefault("similarity_top_k", retriever.config.k)
        instance = cls(mode=retriever.mode, **kwargs)
        instance._lazy = LazyRetriever.wrap(retriever)
        return instance

    @property
    def k(self) -> int:
        """Deprecated alias of ``similarity_top_k``."""
        return self.similarity_top_k

    @property
    def core(self) -> CoreRetriever:
        """The core retriever, built (with its store) on first use (the constructor never connects),
        narrowed to this retriever's ``access`` and ``filters``."""
        return self._lazy.retriever.narrowed(self.scope)

    # -- retrieval -------------------------------------------------------------------------------

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._to_nodes(self.core.search(query_bundle.query_str, **self._search_args(query_bundle)))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._to_nodes(await self.core.asearch(query_bundle.query_str, **self._search_args(query_bundle)))

    def _search_args(self, query_bundle: QueryBundle) -> dict[str, Any]:
        args: dict[str, Any] = {"k": self.similarity_top_k}
        if query_bundle.embedding is not None:
            args["embedding"] = list(query_bundle.embedding)
        return args

    def _to_nodes(self, result: RetrievalResult) -> list[NodeWithScore]:
        """The ``similarity_top_k`` best chunks of the ranked documents (stable: document rank breaks ties)."""
        nodes = [
            NodeWithScore(node=chunk_node(doc, chunk, result.mode, doc.chunk_count), score=chunk.score)
            for doc in result.documents
            for chunk in doc.chunks[: self.max_chunks_per_document]
        ]
        nodes.sort(key=lambda n: -(n.score or 0.0))
        return nodes[: self.similarity_top_k]

    # -- ingestion and lifecycle ------------------------------------------------------------------

    def add_documents(self, documents: Iterable[BaseNode], *, extractor: Any = None, config: IngestConfig | None = None) -> IngestSummary:
        """Ingest LlamaIndex ``Document``s (or ``TextNode``s) into this retriever's store with its embedder.

        The key is ``doc_id``; LlamaIndex makes up a random one when none is given, so set ``doc_id``
        (``SimpleDirectoryReader(filename_as_id=True)`` does) to make re-ingestion update in place.
        A scoped retriever (``access``, ``filters``) writes only under its own labels and never
        replaces a document it cannot read: such a document is a failure in the summary, by id.
        """
        return self._lazy.ingestor(extractor, config, self.scope).ingest(list(documents))

    async def aadd_documents(
        self, documents: Iterable[BaseNode], *, extractor: Any = None, config: IngestConfig | None = None
    ) -> IngestSummary:
        return await self._lazy.ingestor(extractor, config, self.scope).aingest(list(documents))

    def close(self) -> None:
        """Close the store if this retriever opened it (not one given through ``from_retriever``)."""
        self._lazy.close()

    async def aclose(self) -> None:
        await self._lazy.aclose()


def chunk_node(doc: RetrievedDocument, chunk: ChunkHit, mode: str, chunk_count: int | None = None) -> TextNode:
    """A ``TextNode`` for one retrieved chunk, related to its document and, when known, its neighbours.
    The chunk of a node a LlamaIndex vector store wrote has that node's metadata and, as its source,
    the node's source document (``ref_doc_id``), as the vector store's own queries return it."""
    written = "_node_content" in doc.node_storage
    metadata = {
        **doc.metadata,
        "document_id": doc.id,
        "title": doc.title,
        "source": doc.source,
        "document_score": doc.score,
        "chunk_index": chunk.index,
        # Where the chunk is: pages of a paged file (None otherwise) and its section path ("" when unknown).
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "section": " > ".join(chunk.section),
        "concepts": [concept.name for concept in chunk.concepts],
        "mode": mode,
    }
    excluded = _node_exclusions(doc.node_storage["_node_content"]) if written else {}
    source = str(doc.metadata["ref_doc_id"]) if written and doc.metadata.get("ref_doc_id") else doc.id
    relationships = {
        NodeRelationship.SOURCE: RelatedNodeInfo(
            node_id=source, node_type=ObjectType.DOCUMENT, metadata={"title": doc.title, "source": doc.source}
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
        excluded_llm_metadata_keys=[*BOOKKEEPING_KEYS, *NODE_SOURCE_KEYS, *excluded.get("excluded_llm_metadata_keys", ())],
        excluded_embed_metadata_keys=[
            *BOOKKEEPING_KEYS, *NODE_SOURCE_KEYS, "title", "source", "page_start", "page_end", "section",
            *excluded.get("excluded_embed_metadata_keys", ()),
        ],
    )


def _node_exclusions(content: Any) -> dict[str, list[str]]:
    """The metadata keys the written node kept out of the LLM's and the embedder's text (its
    serialised ``excluded_*_metadata_keys``); none when they cannot be read."""
    try:
        node = json.loads(content) if isinstance(content, str) else {}
    except ValueError:
        return {}
    keys = ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys")
    return {
        key: [str(name) for name in node[key]]
        for key in keys
        if isinstance(node, dict) and isinstance(node.get(key), list)
    }
