"""``SurrealKGVectorStore``: LangChain's ``VectorStore`` over a surreal-kgrag store.

Every operation is the core's (``surreal_kgrag.vectors.TextStore``); this module translates
between LangChain ``Document``s and the core's ``StoredText``. Each added ``Document`` is one stored
document (chunked, its concepts extracted and linked, so the knowledge-graph retrievers find it too)
that reads back with exactly its ``page_content``, ``metadata`` and ``id``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from surreal_kgrag import IngestConfig, Scope, SurrealStore
from surreal_kgrag.vectors import StoredText, TextStore, metadata_filter, open_store

DEFAULT_K = 4


class SurrealKGVectorStore(VectorStore):
    """A LangChain vector store on SurrealDB whose documents are also a knowledge graph.

    >>> store = SurrealKGVectorStore(embedding, db_url="surrealkv://kg")
    >>> ids = store.add_documents(docs)
    >>> store.similarity_search_with_score("where was Marie Curie born?", k=2, filter={"year": {"$gte": 1900}})

    ``embedding``: any LangChain ``Embeddings`` (or a core embedder, or None for the core's MiniLM); a store keeps the
    dimension of the model that created it. ``db_url`` / ``store``: where (``mem://``,
    ``surrealkv://path``, ``ws://host:port``...), or an open ``SurrealStore`` the caller keeps
    owning. ``access`` / ``filter``: the scope every read stays in (access labels; a filter every
    document must match, read as a per-call filter is); written documents carry ``labels`` (default: ``access``), and a scoped
    store deletes only what it can read. ``extractor``: the concept extractor (default spaCy).

    Scores (``similarity_search_with_score``) are the cosine similarity of a document's best chunk
    to the query, from -1 to 1, higher is closer; relevance scores map them to 0..1 as ``(s + 1) / 2``.
    Filters are the core's filter language on metadata: ``{"year": {"$gte": 2000}}``,
    ``{"$or": [{"genre": "fiction"}, {"tags": {"$contains": "kids"}}]}``; every bare key is a
    metadata key.
    """

    def __init__(
        self,
        embedding: Embeddings | Any = None,
        *,
        db_url: str | None = None,
        store: SurrealStore | None = None,
        namespace: str | None = None,
        database: str | None = None,
        username: str | None = None,
        password: str | None = None,
        access: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        labels: Sequence[str] | None = None,
        extractor: Any = None,
        ingest_config: IngestConfig | None = None,
    ) -> None:
        store, self._owns_store = open_store(
            store, db_url, namespace=namespace, database=database, username=username, password=password
        )
        self._embedding = embedding
        self.texts = TextStore(
            store,
            embedder=embedding,
            extractor=extractor,
            scope=Scope(access=access, filters=metadata_filter(filter)),
            labels=labels,
            source="langchain",
            config=ingest_config,
        )

    @property
    def embeddings(self) -> Embeddings | None:
        return self._embedding if isinstance(self._embedding, Embeddings) else None

    @property
    def store(self) -> SurrealStore:
        return self.texts.store

    def close(self) -> None:
        """Close the store if this vector store opened it."""
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        if self._owns_store:
            await self.store.aclose()

    # -- writes ----------------------------------------------------------------------------------

    def add_texts(
        self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str] | None = None, **kwargs: Any
    ) -> list[str]:
        """Store each text as one document; returns the ids (given, or a new uuid4 where an id is None:
        ``add_documents`` passes each Document's ``id``, which may be None)."""
        _no_extra(kwargs, "add_texts")
        return self.texts.add(list(texts), metadatas, ids)

    async def aadd_texts(
        self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str] | None = None, **kwargs: Any
    ) -> list[str]:
        _no_extra(kwargs, "aadd_texts")
        return await self.texts.aadd(list(texts), metadatas, ids)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete these ids (missing ones are ignored); ``ids=None`` deletes every document in
        the store's scope (``filter=`` narrows it). Returns True."""
        self.texts.delete(ids, filters=_filter_only(kwargs, "delete"))
        return True

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        await self.texts.adelete(ids, filters=_filter_only(kwargs, "adelete"))
        return True

    # -- reads -----------------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return [_document(item) for item in self.texts.get(list(ids))]

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return [_document(item) for item in await self.texts.aget(list(ids))]

    def similarity_search(self, query: str, k: int = DEFAULT_K, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    async def asimilarity_search(self, query: str, k: int = DEFAULT_K, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in await self.asimilarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = DEFAULT_K, **kwargs: Any) -> list[tuple[Document, float]]:
        """The ``k`` nearest documents with their cosine similarity (-1 .. 1); ``filter=`` on
        metadata, ``score_threshold=`` the lowest similarity returned."""
        kwargs, threshold = _threshold(kwargs)
        found = self.texts.search(query, k=k, filters=_filter_only(kwargs, "similarity_search"))
        return [(_document(item), _score(item)) for item in _above(found, threshold)]

    async def asimilarity_search_with_score(self, query: str, k: int = DEFAULT_K, **kwargs: Any) -> list[tuple[Document, float]]:
        kwargs, threshold = _threshold(kwargs)
        found = await self.texts.asearch(query, k=k, filters=_filter_only(kwargs, "similarity_search"))
        return [(_document(item), _score(item)) for item in _above(found, threshold)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = DEFAULT_K, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_by_vector_with_score(embedding, k, **kwargs)]

    async def asimilarity_search_by_vector(self, embedding: list[float], k: int = DEFAULT_K, **kwargs: Any) -> list[Document]:
        kwargs, threshold = _threshold(kwargs)
        found = await self.texts.asearch(embedding=embedding, k=k, filters=_filter_only(kwargs, "similarity_search_by_vector"))
        return [_document(item) for item in _above(found, threshold)]

    def similarity_search_by_vector_with_score(
        self, embedding: list[float], k: int = DEFAULT_K, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        kwargs, threshold = _threshold(kwargs)
        found = self.texts.search(embedding=embedding, k=k, filters=_filter_only(kwargs, "similarity_search_by_vector"))
        return [(_document(item), _score(item)) for item in _above(found, threshold)]

    def _select_relevance_score_fn(self) -> Any:
        return _relevance

    def max_marginal_relevance_search(
        self, query: str, k: int = DEFAULT_K, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        """Maximal marginal relevance, relevance measured against the query (see ``TextStore.mmr``)."""
        found = self.texts.mmr(query, k=k, fetch_k=fetch_k, lambda_mult=lambda_mult, filters=_filter_only(kwargs, "mmr"))
        return [_document(item) for item in found]

    async def amax_marginal_relevance_search(
        self, query: str, k: int = DEFAULT_K, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        found = await self.texts.ammr(query, k=k, fetch_k=fetch_k, lambda_mult=lambda_mult, filters=_filter_only(kwargs, "mmr"))
        return [_document(item) for item in found]

    def max_marginal_relevance_search_by_vector(
        self, embedding: list[float], k: int = DEFAULT_K, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        found = self.texts.mmr(
            embedding=embedding, k=k, fetch_k=fetch_k, lambda_mult=lambda_mult, filters=_filter_only(kwargs, "mmr")
        )
        return [_document(item) for item in found]

    async def amax_marginal_relevance_search_by_vector(
        self, embedding: list[float], k: int = DEFAULT_K, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        found = await self.texts.ammr(
            embedding=embedding, k=k, fetch_k=fetch_k, lambda_mult=lambda_mult, filters=_filter_only(kwargs, "mmr")
        )
        return [_document(item) for item in found]

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> SurrealKGVectorStore:
        """A store (``kwargs`` are the constructor's: ``db_url``, ``store``, ``access``...) with ``texts`` added."""
        store = cls(embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    async def afrom_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> SurrealKGVectorStore:
        store = cls(embedding, **kwargs)
        await store.aadd_texts(texts, metadatas, ids=ids)
        return store


def _document(item: StoredText) -> Document:
    return Document(id=item.id, page_content=item.text, metadata=item.metadata)


def _score(item: StoredText) -> float:
    return float(item.score if item.score is not None else 0.0)


def _relevance(similarity: float) -> float:
    """Cosine similarity (-1 .. 1) as a LangChain relevance score (0 .. 1)."""
    return (similarity + 1.0) / 2.0


def _filter_only(kwargs: dict[str, Any], method: str) -> Any:
    """The ``filter`` keyword (``custom_filter``, langchain-surrealdb's equality filter, is ANDed
    with it); any other keyword is an error, never silently dropped."""
    kwargs = dict(kwargs)
    specs = [spec for spec in (kwargs.pop("filter", None), kwargs.pop("custom_filter", None)) if spec]
    _no_extra(kwargs, method)
    if len(specs) > 1:
        return {"$and": specs}
    return specs[0] if specs else None


def _threshold(kwargs: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
    """``score_threshold``: the lowest cosine similarity returned (taken out of ``kwargs``)."""
    kwargs = dict(kwargs)
    threshold = kwargs.pop("score_threshold", None)
    return kwargs, None if threshold is None else float(threshold)


def _above(found: list[StoredText], threshold: float | None) -> list[StoredText]:
    return found if threshold is None else [item for item in found if (item.score or 0.0) >= threshold]


def _no_extra(kwargs: Mapping[str, Any], method: str) -> None:
    if kwargs:
        raise TypeError(f"SurrealKGVectorStore.{method}() got unexpected keyword arguments {sorted(kwargs)}")
