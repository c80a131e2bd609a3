"""``SurrealKGRetriever``: a LangChain retriever over a surreal-kgrag store.

All retrieval logic is the core's (``surreal_kgrag.retrieve``); this module only translates its typed
results into LangChain ``Document``s: one ``Document`` per retrieved *document* (so ``k`` counts
documents, as in the core), whose text is that document's best matching chunks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr

from surreal_kgrag import IngestConfig, IngestSummary, RetrievedDocument, Scope
from surreal_kgrag.lazy import LazyRetriever
from surreal_kgrag.retrieval import BaseRetriever as CoreRetriever
from surreal_kgrag.store import checked_int

CHUNK_SEPARATOR = "\n\n"


class SurrealKGRetriever(BaseRetriever):
    """Knowledge-graph retrieval from SurrealDB as a LangChain retriever.

    Construct it from connection settings (the store is opened on the first query, never in the
    constructor) or wrap an existing core retriever with :meth:`from_retriever`:

    >>> retriever = SurrealKGRetriever(db_url="surrealkv://kg", mode="concept", k=4)
    >>> docs = retriever.invoke("Where was Marie Curie born?", k=2)

    Each returned ``Document`` is one stored document: ``page_content`` is the text of its
    ``max_chunks_per_document`` best matching chunks, in reading order, separated by a blank line;
    ``id`` is the document key; ``metadata`` holds the document's own metadata plus ``document_id``,
    ``title``, ``source``, ``score``, ``mode``, ``concepts`` (names of the matched concepts, best
    first) and ``chunk_ids`` (the chunks in ``page_content``). The keys listed win over stored
    metadata keys of the same name. ``access`` and ``filters`` bound everything it reads; a call's
    ``filters`` narrow them (see ``surreal_kgrag.Scope``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    db_url: str | None = Field(
        None, description="mem://, surrealkv://path, ws(s):// or http(s)://; None: $SURREAL_KGRAG_URL or the default embedded store"
    )
    mode: str = Field("hybrid", description="a mode the core's make_retriever accepts (chunk, concept, hybrid, graph)")
    k: int = Field(4, ge=1, le=1000, description="documents returned (overridden per call by invoke(query, k=...))")
    namespace: str | None = None
    database: str | None = None
    username: str | None = None
    password: SecretStr | None = None
    embedder: Any = Field(
        None,
        description="None (MiniLM), a model name, 'openai:<model>', a LangChain Embeddings or a core Embedder; must match the store's",
    )
    filters: Any = Field(None, description="metadata filter passed unchanged to the core, e.g. {'metadata.year': {'$gte': 2000}}")
    access: list[str] | None = Field(
        None,
        description="access labels: only documents carrying one of them are ever read (None: no label restriction, []: nothing)",
    )
    reranker: Any = Field(None, description="an object with rerank(query, documents, *, k, query_embedding=None)")
    retriever_options: dict[str, Any] = Field(
        default_factory=dict, description="other core RetrieverConfig fields: candidates, ef, threshold"
    )
    max_chunks_per_document: int = Field(3, ge=1, description="chunks of a document joined into page_content")

    _lazy: LazyRetriever = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._lazy = LazyRetriever(
            self.mode,
            url=self.db_url,
            namespace=self.namespace,
            database=self.database,
            username=self.username,
            password=self.password.get_secret_value() if self.password else None,
            embedder=self.embedder,
            k=self.k,
            filters=self.filters,
            access=self.access,
            reranker=self.reranker,
            options=self.retriever_options,
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
        """The core retriever, built (with its store) on first use."""
        return self._lazy.retriever

    # -- retrieval -------------------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filters: Any = None,
    ) -> list[Document]:
        result = self.core.search(query, **self._search_args(k, filters))
        return [self._to_document(doc, result.mode) for doc in result.documents]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filters: Any = None,
    ) -> list[Document]:
        result = await self.core.asearch(query, **self._search_args(k, filters))
        return [self._to_document(doc, result.mode) for doc in result.documents]

    def _search_args(self, k: int | None, filters: Any) -> dict[str, Any]:
        args: dict[str, Any] = {"k": self.k if k is None else checked_int("k", k, maximum=1000)}
        if filters is not None:
            args["filters"] = filters
        if self.access is not None or self.filters is not None:
            # Already the built retriever's scope; a wrapped one (from_retriever) is narrowed to it.
            args["scope"] = Scope(access=self.access, filters=self.filters)
        return args

    def _to_document(self, doc: RetrievedDocument, mode: str) -> Document:
        chunks = sorted(doc.chunks[: self.max_chunks_per_document], key=lambda c: c.index)
        metadata = {
            **doc.metadata,
            "document_id": doc.id,
            "title": doc.title,
            "source": doc.source,
            "score": doc.score,
            "mode": mode,
            "concepts": [concept.name for concept in doc.concepts],
            "chunk_ids": [chunk.id for chunk in chunks],
            "provenance": [path.model_dump() for path in doc.provenance],
        }
        return Document(id=doc.id, page_content=CHUNK_SEPARATOR.join(c.content for c in chunks), metadata=metadata)

    # -- ingestion and lifecycle ------------------------------------------------------------------

    def add_documents(
        self, documents: Iterable[Document], *, extractor: Any = None, config: IngestConfig | None = None
    ) -> IngestSummary:
        """Ingest LangChain ``Document``s into this retriever's store with its embedder.

        A document's key is its ``id`` when set (re-adding it updates it in place), otherwise a hash
        of its text. ``extractor`` picks the concept extractor (default: spaCy).
        """
        return self._lazy.ingestor(extractor, config).ingest(list(documents))

    async def aadd_documents(
        self, documents: Iterable[Document], *, extractor: Any = None, config: IngestConfig | None = None
    ) -> IngestSummary:
        return await self._lazy.ingestor(extractor, config).aingest(list(documents))

    def close(self) -> None:
        """Close the store if this retriever opened it (not one given through ``from_retriever``)."""
        self._lazy.close()

    async def aclose(self) -> None:
        await self._lazy.aclose()
