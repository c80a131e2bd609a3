"""Vector-store operations over the knowledge graph: what LangChain's ``VectorStore`` and LlamaIndex's
``BasePydanticVectorStore`` need, written once here and used by both.

A *text* is one stored document: added with the caller's id, its exact text and metadata; it goes
through the ingest pipeline like any other document (chunks, concepts, ``MENTIONS_CONCEPT`` edges,
so every retrieval mode works on it), with ``IngestConfig.keep_text`` so it reads back exactly.

- :meth:`TextStore.add` writes texts under caller ids (a uuid4 when an id is None) and returns the ids;
  adding an id again replaces that text (an unchanged one is skipped).
- :meth:`TextStore.get` by ids, by filter, or both; :meth:`TextStore.delete` by ids, by filter, or both.
- :meth:`TextStore.search`: the ``k`` nearest texts to a query or a vector, each scored by its best
  chunk's cosine similarity to the query (-1 .. 1), within the scope and an optional filter.
- :meth:`TextStore.mmr`: maximal marginal relevance over the ``fetch_k`` nearest, relevance measured
  against the query (not against the top hit).

Filters use the core language (:mod:`surreal_kgrag.retrieval.filters`) with every bare key meaning
a metadata key (:func:`metadata_filter`): ``{"id": 1}`` is ``metadata.id``, as vector-store users
expect. Everything reads within the store's :class:`Scope`; writes carry ``labels`` (default: the
scope's labels, so a scoped store can read what it writes; other labels are a :class:`ScopeError`),
and a scoped store replaces and deletes only what it can read: adding an id that exists outside its
scope is a :class:`VectorWriteError` naming the id. Every operation is a plan
(:mod:`surreal_kgrag.retrieval.plan`) with a sync and an async runner.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from pydantic import Field

from .checks import IDS_PER_QUERY, batches
from .db import SurrealStore, checked_int
from .db.sdk import RecordID
from .errors import ConfigurationError, KGRagError, ScopeError
from .extract import ConceptExtractor
from .ids import document_id
from .ingest import IngestConfig, Ingestor
from .ingest.delete import delete_records
from .models import IngestSummary, LoadFailure, SourceDocument
from .rerank import MMRReranker
from .retrieval import ChunkRetriever, Scope
from .retrieval import plan as plans
from .retrieval.filters import FilterError, check_filter_size
from .retrieval.plan import Call, Plan, Query
from .retrieval.results import Metadata, WithNodeStorage

__all__ = [
    "StoredText",
    "TextStore",
    "VectorWriteError",
    "awrite_documents",
    "metadata_filter",
    "open_store",
    "write_documents",
]

#: The query label of a search given only a vector (a retrieval result always names its query).
VECTOR_QUERY = "<vector>"


class StoredText(WithNodeStorage):
    """One stored text as a vector store returns it (LlamaIndex's node bookkeeping in ``node_storage``)."""

    id: str
    text: str
    metadata: Metadata = Field(default_factory=dict)
    score: float | None = Field(None, description="cosine similarity of its best chunk to the query (-1 .. 1); None from get()")


class VectorWriteError(KGRagError):
    """Some texts could not be written; the others were. ``failures`` names each one and why."""

    def __init__(self, failures: list[LoadFailure], stored: list[str]) -> None:
        listed = "; ".join(str(f) for f in failures[:5]) + ("; ..." if len(failures) > 5 else "")
        super().__init__(f"{len(failures)} of {len(failures) + len(stored)} texts were not stored: {listed}")
        self.failures = failures
        self.stored = stored


def open_store(store: SurrealStore | None, db_url: str | None, **connection: Any) -> tuple[SurrealStore, bool]:
    """The store a vector store works on: ``store`` as given, or a new one on ``db_url``
    (``connection``: namespace, database, username, password). The flag is True for a new store,
    which its vector store then owns and closes."""
    if store is not None and db_url is not None:
        raise ConfigurationError("give db_url or store, not both")
    if store is not None:
        return store, False
    return SurrealStore(db_url, **connection), True


def metadata_filter(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A vector-store filter in the core language: bare keys (``id``, ``title``, anything) are
    metadata keys, ``$and`` / ``$or`` / ``$not`` nest as usual; ``metadata.x`` stays as written."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise FilterError(f"a filter is a dict of metadata conditions, got {spec!r}")
    check_filter_size(spec)  # before the walk below recurses

    def key(name: Any) -> Any:
        if not isinstance(name, str) or name.startswith(("$", "metadata.")):
            return name
        return f"metadata.{name}"

    def walk(node: Any) -> Any:
        if not isinstance(node, Mapping):
            return node
        out: dict[str, Any] = {}
        for name, value in node.items():
            if name in ("$and", "$or") and isinstance(value, (list, tuple)):
                out[name] = [walk(item) for item in value]
            elif name == "$not":
                out[name] = walk(value)
            else:
                out[key(name)] = value
        return out

    return walk(spec) or None


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
        keys = write_documents(self.ingestor, self._documents(texts, metadatas, ids))
        self._ready = self._ready or bool(keys)
        return keys

    async def aadd(
        self, texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None] | None = None, ids: Sequence[str | None] | None = None
    ) -> list[str]:
        keys = await awrite_documents(self.ingestor, self._documents(texts, metadatas, ids))
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
        return plans.run(self.store, self._search(query, embedding, k, _only(filters, ids)))

    async def asearch(
        self,
        query: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        k: int = 4,
        filters: Mapping[str, Any] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[StoredText]:
        return await plans.arun(self.store, self._search(query, embedding, k, _only(filters, ids)))

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
        return plans.run(self.store, self._search(query, embedding, k, _only(filters, None), mmr=(fetch_k, lambda_mult)))

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
        return await plans.arun(self.store, self._search(query, embedding, k, _only(filters, None), mmr=(fetch_k, lambda_mult)))

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
        keys = list(dict.fromkeys(_keys(ids))) if ids is not None else (yield from self._matching(spec))
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
        keys = None if ids is None else list(dict.fromkeys(_keys(ids)))
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

    # -- helpers ---------------------------------------------------------------------------------

    def _documents(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None,
        ids: Sequence[str | None] | None,
    ) -> list[SourceDocument]:
        if isinstance(texts, str):
            raise ConfigurationError("add takes a list of texts, not one string")
        texts = list(texts)
        metadatas = list(metadatas) if metadatas is not None else [None] * len(texts)
        given = list(ids) if ids is not None else [None] * len(texts)
        if len(metadatas) != len(texts) or len(given) != len(texts):
            raise ConfigurationError(
                f"got {len(texts)} texts, {len(metadatas)} metadatas and {len(given)} ids: give one of each per text"
            )
        keys = [_key(i, key) if key is not None else str(uuid.uuid4()) for i, key in enumerate(given)]
        documents = []
        for i, (text, metadata, key) in enumerate(zip(texts, metadatas, keys)):
            if not isinstance(text, str):
                raise ConfigurationError(f"text {i} is a {type(text).__name__}, expected str")
            if metadata is not None and not isinstance(metadata, Mapping):
                raise ConfigurationError(f"metadata {i} is a {type(metadata).__name__}, expected a dict")
            documents.append(
                SourceDocument(key=key, text=text, source=f"{self.source}:{key}", metadata=dict(metadata or {}), access=self.labels)
            )
        return documents


def write_documents(ingestor: Ingestor, documents: Sequence[SourceDocument]) -> list[str]:
    """Ingest ``documents`` and return their keys, in order; when some could not be written (the
    others are), raise :class:`VectorWriteError` naming them."""
    documents = list(documents)
    if not documents:
        return []
    summary = ingestor.ingest(documents)
    return plans.run(ingestor.store, _written(summary, documents, ingestor.scope))


async def awrite_documents(ingestor: Ingestor, documents: Sequence[SourceDocument]) -> list[str]:
    documents = list(documents)
    if not documents:
        return []
    summary = await ingestor.aingest(documents)
    return await plans.arun(ingestor.store, _written(summary, documents, ingestor.scope))


def _written(summary: IngestSummary, documents: list[SourceDocument], scope: Scope) -> Plan[list[str]]:
    keys = [doc.key for doc in documents]
    if not summary.failures:
        return keys
    # Which ones made it: the stored version is the one given (a failed update keeps the old one).
    condition = scope.compile()
    stored: dict[str, str] = {}
    for batch in batches(list(dict.fromkeys(keys)), IDS_PER_QUERY):
        params = {"ids": [document_id(key) for key in batch], **condition.params}
        rows = (yield Query("document_hashes", params, {"filter": condition}))[-1]
        stored |= {str(row["id"].id): row["content_hash"] for row in rows}
    written = [doc.key for doc in documents if stored.get(doc.key) == doc.content_hash]
    raise VectorWriteError(summary.failures, written)


def _key(position: int, key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"id {position} must be a non-empty string, got {key!r}")
    return key


def _only(filters: Mapping[str, Any] | None, ids: Sequence[str] | None) -> dict[str, Any] | None:
    """A search filter in the core language: ``filters`` on metadata, and the texts in ``ids``."""
    spec = metadata_filter(filters)
    if ids is None:
        return spec
    restrict = {"id": {"$in": _keys(ids)}} if ids else {"$not": {"id": {"$exists": True}}}
    return restrict if spec is None else {"$and": [spec, restrict]}


def _keys(ids: Sequence[str]) -> list[str]:
    if isinstance(ids, str):
        raise ConfigurationError("ids is a list of strings, not one string")
    return [_key(i, key) for i, key in enumerate(ids)]
