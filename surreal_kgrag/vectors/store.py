""":class:`TextStore`, a vector store's operations within one scope: gets, searches and deletes run
here as plans, and ``add`` hands its texts to :mod:`.writes`; with the texts it returns
(:class:`StoredText`) and the store it opens (:func:`open_store`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from pydantic import Field

from ..checks import IDS_PER_QUERY, batches
from ..db import SurrealStore, checked_int
from ..db.sdk import RecordID
from ..errors import ConfigurationError, ScopeError
from ..extract import ConceptExtractor
from ..ids import document_id
from ..ingest import IngestConfig, Ingestor
from ..ingest.delete import delete_records
from ..rerank import MMRReranker
from ..retrieval import ChunkRetriever, Scope
from ..retrieval import plan as plans
from ..retrieval.plan import Call, Plan, Query
from ..retrieval.results import Metadata, WithNodeStorage
from .filters import metadata_filter, search_filter, text_keys
from .writes import awrite_documents, source_documents, write_documents

__all__ = ["VECTOR_QUERY", "StoredText", "TextStore", "open_store"]

#: The query label of a search given only a vector (a retrieval result always names its query).
VECTOR_QUERY = "<vector>"


class StoredText(WithNodeStorage):
    """One stored text as a vector store returns it (LlamaIndex's node bookkeeping in ``node_storage``)."""

    id: str
    text: str
    metadata: Metadata = Field(default_factory=dict)
    score: float | None = Field(None, description="cosine similarity of its best chunk to the query (-1 .. 1); None from get()")


def open_store(store: SurrealStore | None, db_url: str | None, **connection: Any) -> tuple[SurrealStore, bool]:
    """The store a vector store works on: ``store`` as given, or a new one on ``db_url``
    (``connection``: namespace, database, username, password). The flag is True for a new store,
    which its vector store then owns and closes."""
    if store is not None and db_url is not None:
        raise ConfigurationError("give db_url or store, not both")
    if store is not None:
        return store, False
    return SurrealStore(db_url, **connection), True


class TextStore:
    """The vector-store operations on one knowledge-graph store, within one scope.

    ``embedder`` (any the core accepts: a model name, a LangChain or LlamaIndex embedding model)
    sets the store's dimension when the store is new and must match it otherwise; ``extractor``
    finds concepts (default spaCy); ``labels`` are the access labels written texts carry; ``source`` prefixes each text's
    ``source`` field (``<source>:<id>``).
    Nothing touches the database until the first operation.
    """

    def __init__(
        self,
        store: SurrealStore,
        *,
        embedder: Any = None,
        extractor: ConceptExtractor | Any = None,
        scope: Scope | None = None,
        labels: Sequence[str] | None = None,
        source: str = "vectorstore",
        config: IngestConfig | None = None,
    ) -> None:
        self.store = store
        self.scope = Scope.of(scope).narrow(Scope(record_user=bool(store.config.access)))
        self.labels = list(labels) if labels is not None else list(self.scope.access or ())
        if self.scope.access is not None and not set(self.labels) <= set(self.scope.access):
            outside = sorted(set(self.labels) - set(self.scope.access))
            raise ScopeError(
                f"labels {outside} are outside this store's access labels {sorted(self.scope.access)}: "
                "a scoped store writes only under its own labels"
            )
        self.source = source
        config = (config or IngestConfig(show_progress=False)).model_copy(update={"keep_text": True})
        self.ingestor = Ingestor(store, embedder=embedder, extractor=extractor, config=config, scope=self.scope)
        self.embedder = self.ingestor.embedder
        self._ready = False

    def __repr__(self) -> str:
        return f"TextStore(store={self.store!r}, scope={self.scope!r})"

    # -- writes ----------------------------------------------------------------------------------

    def add(
        self, texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None] | None = None, ids: Sequence[str | None] | None = None
    ) -> list[str]:
        """Write ``texts`` (one document each) and return their ids, in order."""
        documents = source_documents(texts, metadatas, ids, source=self.source, labels=self.labels)
        keys = write_documents(self.ingestor, documents)
        self._ready = self._ready or bool(keys)
        return keys

    async def aadd(
        self, texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None] | None = None, ids: Sequence[str | None] | None = None
    ) -> list[str]:
        documents = source_documents(texts, metadatas, ids, source=self.source, labels=self.labels)
        keys = await awrite_documents(self.ingestor, documents)
        self._ready = self._ready or bool(keys)
        return keys

    def delete(self, ids: Sequence[str] | None = None, *, filters: Mapping[str, Any] | None = None) -> int:
        """Delete the texts with these ids (or, with ``ids=None``, every text matching ``filters``
        in the scope; both None: every text in the scope). Missing ids are ignored. Returns how many
        were deleted."""
        return plans.run(self.store, self._delete(ids, filters))

    async def adelete(self, ids: Sequence[str] | None = None, *, filters: Mapping[str, Any] | None = None) -> int:
        return await plans.arun(self.store, self._delete(ids, filters))

    # -- reads -----------------------------------------------------------------------------------

    def get(self, ids: Sequence[str] | None, *, filters: Mapping[str, Any] | None = None) -> list[StoredText]:
        """The texts with these ids, in the order asked; missing ids (or ids outside the scope or
        ``filters``) are left out. ``ids=None``: every text in the scope matching ``filters``, which
        must then be given."""
        return plans.run(self.store, self._get(ids, filters))

    async def aget(self, ids: Sequence[str] | None, *, filters: Mapping[str, Any] | None = None) -> list[StoredText]:
        return await plans.arun(self.store, self._get(ids, filters))

    def search(
        self,
        query: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        k: int = 4,
        filters: Mapping[str, Any] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[StoredText]:
        """The ``k`` texts nearest to ``query`` (or to ``embedding``), best first, scored; ``ids``
        limits the search to those texts."""
        return plans.run(self.store, self._search(query, embedding, k, search_filter(filters, ids)))

    async def asearch(
        self,
        query: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        k: int = 4,
        filters: Mapping[str, Any] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[StoredText]:
        return await plans.arun(self.store, self._search(query, embedding, k, search_filter(filters, ids)))

    def mmr(
        self,
        query: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filters: Mapping[str, Any] | None = None,
    ) -> list[StoredText]:
        """``k`` texts picked from the ``fetch_k`` nearest by maximal marginal relevance: relevance is
        the similarity of a text's best chunk to the query, redundancy its similarity to the texts
        already picked; ``lambda_mult`` 1 ranks by relevance alone, 0 by diversity alone. Each
        text's score is its similarity to the query."""
        return plans.run(self.store, self._search(query, embedding, k, search_filter(filters, None), mmr=(fetch_k, lambda_mult)))

    async def ammr(
        self,
        query: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filters: Mapping[str, Any] | None = None,
    ) -> list[StoredText]:
        return await plans.arun(self.store, self._search(query, embedding, k, search_filter(filters, None), mmr=(fetch_k, lambda_mult)))

    # -- plans -----------------------------------------------------------------------------------

    def _initialised(self) -> Plan[bool]:
        """Whether the store holds a schema yet (an empty store has nothing to read)."""
        if not self._ready:
            self._ready = bool((yield Query("store_meta"))[-1])
        return self._ready

    def _get(self, ids: Sequence[str] | None, filters: Mapping[str, Any] | None) -> Plan[list[StoredText]]:
        spec = metadata_filter(filters)
        if ids is None and spec is None:
            raise ConfigurationError("get needs ids or filters (reading every text at once is not offered)")
        if not (yield from self._initialised()):
            return []
        keys = list(dict.fromkeys(text_keys(ids))) if ids is not None else (yield from self._matching(spec))
        found: dict[str, StoredText] = {}
        for batch in batches(keys, IDS_PER_QUERY):
            found |= yield from self._read(batch, spec)
        return [found[key] for key in keys if key in found]

    def _matching(self, filters: Mapping[str, Any] | None) -> Plan[list[str]]:
        condition = self.scope.narrow(filters=filters).compile()
        rows = (yield Query("vector_keys", {"ids": None, **condition.params}, {"filter": condition}))[-1]
        return [str(row.id) for row in rows]

    def _read(self, keys: Sequence[str], filters: Mapping[str, Any] | None = None) -> Plan[dict[str, StoredText]]:
        condition = self.scope.restrict(filters)
        params = {"ids": [document_id(key) for key in keys], **condition.params}
        rows = (yield Query("vector_texts", params, {"filter": condition}))[-1]
        return {
            str(row["key"]): StoredText(id=str(row["key"]), text=row["text"] or "", metadata=row["metadata"] or {})
            for row in rows
        }

    def _search(
        self,
        query: str | None,
        embedding: Sequence[float] | None,
        k: int,
        filters: Mapping[str, Any] | None,
        mmr: tuple[int, float] | None = None,
    ) -> Plan[list[StoredText]]:
        k = checked_int("k", k, maximum=1000)
        if query is None and embedding is None:
            raise ConfigurationError("search needs a query text or an embedding")
        if not (yield from self._initialised()):
            return []
        options: dict[str, Any] = {}
        if mmr is not None:
            fetch_k, lambda_mult = mmr
            options = {
                "reranker": MMRReranker(self.store, self.embedder, lambda_mult=lambda_mult),
                "rerank_pool": max(checked_int("fetch_k", fetch_k, maximum=1000), k),
            }
        # threshold -1: a vector store ranks every text, however dissimilar (cosine similarity can be negative).
        retriever = ChunkRetriever(self.store, embedder=self.embedder, scope=self.scope, k=k, threshold=-1.0, **options)
        result = yield from retriever.plan(
            query or VECTOR_QUERY,
            k=k,
            filters=filters,
            embedding=None if embedding is None else [float(x) for x in embedding],
        )
        if not result.documents:
            return []
        texts = yield from self._read([doc.id for doc in result.documents])
        similarity = {doc.id: max(chunk.score for chunk in doc.chunks) for doc in result.documents}
        return [
            texts[doc.id].model_copy(update={"score": similarity[doc.id]}) for doc in result.documents if doc.id in texts
        ]

    def _delete(self, ids: Sequence[str] | None, filters: Mapping[str, Any] | None) -> Plan[int]:
        keys = None if ids is None else list(dict.fromkeys(text_keys(ids)))
        if keys == [] or not (yield from self._initialised()):
            return 0
        scope = self.scope.narrow(filters=metadata_filter(filters))
        condition = scope.compile()
        doomed: list[RecordID] = []
        for batch in [None] if keys is None else batches(keys, IDS_PER_QUERY):
            params = {"ids": None if batch is None else [document_id(key) for key in batch], **condition.params}
            doomed += (yield Query("vector_keys", params, {"filter": condition}))[-1]
        if not doomed:
            return 0
        # In transactions of at most group_chunks chunks (a filter may match the whole store), each
        # checking the scope and filter again: a text replaced meanwhile under other labels stays.
        group = self.ingestor.config.group_chunks
        return int((yield Call(partial(delete_records, self.store, doomed, group, scope), None, "delete")))
