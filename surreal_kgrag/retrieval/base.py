"""The retriever template: ``search()`` -> ``plan()`` (the queries, written once as a plan, see
:mod:`.plan`) -> ranked ``RetrievedDocument``s -> optional reranker -> exactly ``k`` results."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..db import SurrealStore, checked_int
from ..embed import Embedder, resolve_embedder
from ..embed.base import embeds_elsewhere, in_this_process
from ..errors import ConfigurationError
from ..surql import CompiledFilter
from . import plan as plans
from .config import RetrieverConfig
from .plan import Call, Plan, Query, Start, Wait
from .results import EMBED, RERANK, RetrievalResult, RetrievedDocument, Timings
from .scope import Scope

#: The largest KNN pool a search grows to while grouping leaves fewer than k documents.
MAX_CANDIDATES = 5000
#: How long chunk counts (:class:`ChunkTotals`) are used before they are counted again.
RECOUNT_SECONDS = 60.0


class Request(BaseModel):
    """One search, prepared: what every retriever's plan works from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    query: str
    k: int
    fetch: int = Field(description="documents the plan ranks: k, or the rerank pool")
    scope: Scope = Field(description="what the caller may read")
    filter: CompiledFilter = Field(description="the scope ANDed with the call's filter")
    embedding: list[float] | None = Field(description="the query's embedding; None while it is being computed")
    embedding_started: Any = Field(None, description="the embedding's call (plan.Start), when it runs beside the plan")
    concepts: list[str] = Field(default_factory=list)

    @property
    def vector(self) -> np.ndarray:
        """The embedding as float32: the embedded engine's encoder packs it in one step. A plan
        reads it after ``yield from retriever.embedded(request)``."""
        if self.embedding is None:
            raise RuntimeError("the query's embedding is still being computed: yield from embedded(request) first")
        return np.asarray(self.embedding, dtype=np.float32)


class LRU:
    """A small least-recently-used cache, safe to share between threads (LangChain's ``batch``
    runs a retriever's invocations in a thread pool)."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def lookup(self, key: str) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def forget(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def remember(self, key: str, value: Any) -> Any:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


def cache_key(*parts: Any) -> str:
    """A key for what a retriever caches per filter: values that print alike but differ in type (a
    datetime and its string, a record id and its text) match different rows, so they stay apart."""
    return json.dumps(parts, sort_keys=True, default=lambda value: [type(value).__name__, str(value)])


class ChunkTotals(NamedTuple):
    """Chunks inside a condition (a scope, or a scope and a call's filter) and in the whole store,
    and the documents holding the chunks inside (``count_chunks.surql``). At most
    ``passing_documents`` documents are read: past them ``whole`` is False, and ``scope`` and
    ``documents`` are lower bounds."""

    scope: int
    store: int
    documents: int
    whole: bool = True

    @property
    def weighed(self) -> int:
        """The N a concept's chunk count is weighed against: the chunks inside, or the store's
        (an upper bound) when they were not all read."""
        return self.scope if self.whole else self.store


@dataclass
class Loaded:
    """What a retriever reads once or now and then, in one object its narrowed copies share."""

    schema: int = 0  # the store's schema version as last read (it only goes up; 0: no schema yet)
    documents: tuple[int, float] | None = None  # documents in the store, and when they were counted


class BaseRetriever:
    mode: ClassVar[str]
    config_class: ClassVar[type[RetrieverConfig]] = RetrieverConfig
    # KNN pool when the config names none: enough to fill k documents, and each vector fetched costs
    # about 0.2 ms on the embedded engine, more than the HNSW search itself.
    default_candidates: ClassVar[int] = 40
    # Whether the mode's plan has work that needs no vector (reading the question, BM25, the names
    # it contains), which runs while an embedder that leaves this interpreter free embeds it.
    embeds_beside: ClassVar[bool] = False

    def __init__(
        self,
        store: SurrealStore,
        *,
        embedder: Embedder | Any = None,
        config: RetrieverConfig | None = None,
        reranker: Any = None,
        scope: Scope | None = None,
        **options: Any,
    ) -> None:
        self.store = store
        self.embedder = resolve_embedder(embedder)
        if config is None:
            config = self.config_class(**options)
        elif not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} takes a {self.config_class.__name__}, got {type(config).__name__}")
        elif options:  # options given beside a config override its fields (and are checked like them)
            config = type(config)(**{**config.model_dump(), **options})
        self.config = config
        self.reranker = reranker
        # The config's access labels and filter, narrowed by `scope` (a bad filter fails here).
        self.scope = Scope.of(scope, access=self.config.access, filters=self.config.filters).narrow(
            Scope(record_user=bool(store.config.access))
        )
        self._embeddings = LRU()
        self._dense = LRU(256)  # filters found to hold more documents than a search counts (Pool)
        self._chunk_totals = LRU(64)  # per condition: (ChunkTotals, when counted)
        self._loaded = Loaded()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(store={self.store!r}, k={self.config.k})"

    def narrowed(self, scope: Scope | None) -> BaseRetriever:
        """This retriever (same store, embedder, config, reranker and caches) reading within its
        scope narrowed by ``scope``; itself when ``scope`` is None. A shallow copy: what a retriever
        caches lives in holders it shares with its copies (an ``LRU``), never in a plain field a
        copy would start over with."""
        if scope is None or scope.unrestricted:
            return self
        clone = copy.copy(self)
        clone.scope = self.scope.narrow(scope)
        return clone

    # -- public API ------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        embedding: list[float] | None = None,
        scope: Scope | None = None,
    ) -> RetrievalResult:
        """The ``k`` best documents for ``query`` within the retriever's scope; ``filters`` and
        ``scope`` narrow it for this call (they are ANDed with it, never substituted). The result's
        ``timings`` hold the call's wall-clock time and its parts."""
        started = time.perf_counter()
        timings: dict[str, float] = {}
        result = plans.run(self.store, self.plan(query, k=k, filters=filters, embedding=embedding, scope=scope), timings)
        result.timings = Timings.of(time.perf_counter() - started, timings)
        return result

    async def asearch(
        self,
        query: str,
        *,
        k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        embedding: list[float] | None = None,
        scope: Scope | None = None,
    ) -> RetrievalResult:
        """Async ``search``: the same plan, awaited on the store's async connection (``timings``:
        the wall-clock time from the call to its answer, waiting for the event loop included)."""
        started = time.perf_counter()
        timings: dict[str, float] = {}
        plan = self.plan(query, k=k, filters=filters, embedding=embedding, scope=scope)
        result = await plans.arun(self.store, plan, timings)
        result.timings = Timings.of(time.perf_counter() - started, timings)
        return result

    def forget(self, query: str) -> None:
        """Forget what was cached about ``query`` (its embedding; in hybrid mode the concepts it
        names), so its next search pays for them as a new question does: evaluation times every
        question so."""
        self._embeddings.forget(query)

    def plan(
        self,
        query: str,
        *,
        k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        embedding: list[float] | None = None,
        scope: Scope | None = None,
    ) -> Plan[RetrievalResult]:
        """The search as a plan (see :mod:`surreal_kgrag.retrieval.plan`), for callers that drive
        it themselves, such as the agent tools."""
        request = yield from self.prepare(query, k=k, filters=filters, embedding=embedding, scope=scope)
        if not (yield from self._schema_since(1)):  # a store nothing was ingested into yet has no tables to read
            return RetrievalResult(query=query, mode=self.mode, documents=[])
        documents = yield from self._plan(request)
        if self.reranker is not None and documents:
            documents = yield from self._rerank(request, documents)
        return RetrievalResult(query=query, mode=self.mode, documents=documents[: request.k])

    def _schema_since(self, version: int) -> Plan[bool]:
        """Whether the store is at schema ``version`` or later (1: it has a schema at all). A store
        nothing was ingested into, or written by an older version, is asked again on the next
        search, until an ingest or ``ensure_schema`` brings it up to date; once it is, never again."""
        if self._loaded.schema < version:
            meta = (yield Query("store_meta"))[-1]  # NONE, not an error, before the schema exists
            found = meta.get("schema_version") if isinstance(meta, dict) else None
            self._loaded.schema = found if isinstance(found, int) else 0
        return self._loaded.schema >= version

    def _chunks_inside(self, condition: CompiledFilter) -> Plan[ChunkTotals]:
        """Chunks inside ``condition`` and in the store (``count_chunks.surql``), counted again now
        and then as the store grows."""
        key = cache_key(condition.condition, condition.params)
        cached = self._chunk_totals.lookup(key)
        if cached is not None and time.monotonic() - cached[1] <= RECOUNT_SECONDS:
            return cached[0]
        params = {"filtered": bool(condition.condition), **condition.params}
        counted = (yield Query("count_chunks", params, {"filter": condition.on_documents()}))[-1]
        totals = ChunkTotals(
            scope=max(int(counted["scope"] or 0), 1),
            store=max(int(counted["store"] or 0), 1),
            documents=int(counted["documents"] or 0),
            whole=bool(counted["whole"]),
        )
        self._chunk_totals.remember(key, (totals, time.monotonic()))
        return totals

    def _passing(self, request: Request) -> Plan[ChunkTotals | None]:
        """Chunks inside the request's scope and filter and in the store, for a filtered search
        (its KNN pool depends on the share passing: :class:`.pool.Pool`); None without a filter."""
        if not request.filter.condition:
            return None
        return (yield from self._chunks_inside(request.filter))

    # -- request preparation ---------------------------------------------------------------------

    def prepare(
        self,
        query: str,
        *,
        k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        embedding: list[float] | None = None,
        scope: Scope | None = None,
    ) -> Plan[Request]:
        """The checked request a search runs: k, the scope and filter, the query's embedding (and,
        in hybrid mode, the concepts it names)."""
        _check_query(query, self.config.max_query_chars)
        k = checked_int("k", k if k is not None else self.config.k, maximum=1000)
        fetch = max(k, self.config.rerank_pool) if self.reranker is not None else k
        narrowed = self.scope.narrow(scope)
        compiled = narrowed.restrict(filters)
        started = None
        if embedding is not None:
            embedding = _checked_embedding(embedding, getattr(self.embedder, "dimension", None))
        if embedding is None:
            embedding = self._embeddings.lookup(query)
        if embedding is None:
            beside = self.embeds_beside and embeds_elsewhere(self.embedder)
            # with nothing to run meanwhile, a child process's embedder is asked here, with no hand-off
            embedder = self.embedder if beside else in_this_process(self.embedder)
            call = embedding_call(embedder, query)
            if beside:
                started = yield Start(call)
            else:
                embedding = self._embeddings.remember(query, _as_list((yield call)))
        request = Request(
            query=query,
            k=k,
            fetch=fetch,
            scope=narrowed,
            filter=compiled,
            embedding=None if embedding is None else list(embedding),
            embedding_started=started,
        )
        yield from self._analyze(request)
        return request

    def embedded(self, request: Request) -> Plan[list[float]]:
        """The request's embedding, waited for if it is still being computed. An embedder whose
        work does not hold this interpreter (``embeds_elsewhere``: a remote service, a child
        process) embeds the question while the plan reads it and runs the queries that need no
        vector; the wait is what the search's ``embed`` part counts."""
        if request.embedding is None:
            vector = yield Wait(request.embedding_started, EMBED)
            request.embedding = list(self._embeddings.remember(request.query, _as_list(vector)))
        return request.embedding

    def _analyze(self, request: Request) -> Plan[None]:
        """Work a mode needs before its queries (hybrid: the concepts the query names)."""
        return
        yield  # pragma: no cover - makes this a generator

    def _rerank(self, request: Request, documents: list[RetrievedDocument]) -> Plan[list[RetrievedDocument]]:
        # A reranker that reads the store reads within the request's scope.
        scoped = getattr(self.reranker, "scoped", None)
        reranker = scoped(request.scope) if scoped is not None else self.reranker
        yield from self.embedded(request)
        options = {"k": request.k, "query_embedding": request.embedding}
        arerank = getattr(reranker, "arerank", None)
        return (
            yield Call(
                partial(reranker.rerank, request.query, documents, **options),
                partial(arerank, request.query, documents, **options) if arerank is not None else None,
                RERANK,
            )
        )

    # -- the query plan --------------------------------------------------------------------------

    def _plan(self, request: Request) -> Plan[list[RetrievedDocument]]:
        raise NotImplementedError

    def _candidates(self, request: Request) -> int:
        """The first KNN pool the search ranks: the configured one, and at least twice the documents
        wanted (a filtered search reads more, see :class:`Pool`)."""
        return min(max(self.config.candidates or self.default_candidates, 2 * request.fetch), MAX_CANDIDATES)

    def _knn_placeholders(self, request: Request, candidates: int) -> dict[str, Any]:
        return {
            "candidates": checked_int("candidates", candidates),
            "ef": checked_int("ef", max(self.config.ef, candidates)),
            "filter": request.filter,
            "document_filter": request.filter.on_documents(),
        }


def embedding_call(embedder: Any, text: str) -> Call:
    """The call that embeds ``text`` as a question (blocking and async), timed as ``embed``."""
    return Call(partial(embedder.embed_query, text), partial(embedder.aembed_query, text), EMBED)


def _check_query(query: Any, max_chars: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ConfigurationError(f"the query must be a non-empty string, got {query!r}")
    if len(query) > max_chars:
        raise ConfigurationError(
            f"the query has {len(query):,} characters, more than max_query_chars={max_chars:,} (RetrieverConfig); "
            "ask a shorter question"
        )
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ConfigurationError(
            f"the query holds {query[error.start]!r} at character {error.start}, which is not valid Unicode text "
            "(a lone surrogate); fix the text"
        ) from None


def _checked_embedding(embedding: Any, dimension: int | None) -> list[float]:
    """A caller's query embedding as floats, checked before it reaches a query: finite numbers, as
    many as the embedder's dimension."""
    size = len(embedding) if hasattr(embedding, "__len__") and not isinstance(embedding, (str, bytes)) else None
    if size is None or (dimension is not None and size != dimension) or size == 0:
        expected = f"{dimension} numbers" if dimension is not None else "a non-empty list of numbers"
        got = f"{size:,} values" if size is not None else type(embedding).__name__
        raise ConfigurationError(f"the query embedding must be {expected} (the embedder's dimension), got {got}")
    try:
        vector = np.asarray(embedding, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigurationError("the query embedding must be a list of numbers; it holds something else") from None
    if vector.ndim != 1 or not np.isfinite(vector).all():
        raise ConfigurationError("the query embedding must be a flat list of finite numbers (no NaN or infinity)")
    return _as_list(vector)


def _as_list(vector: np.ndarray) -> list[float]:
    return np.asarray(vector, dtype=np.float32).reshape(-1).tolist()


def __getattr__(name: str) -> Any:
    """The KNN pool's names, which moved to :mod:`.pool` (imported here on first use: it imports
    this module)."""
    if name in ("FILTERED_POOL", "Pool", "exact_instead", "grow", "pool_used"):
        from . import pool

        return getattr(pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
