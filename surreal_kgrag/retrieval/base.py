"""The retriever template: ``search()`` -> ``plan()`` (the queries, written once as a plan, see
:mod:`.plan`) -> ranked ``RetrievedDocument``s -> optional reranker -> exactly ``k`` results."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from functools import partial
from typing import Any, ClassVar

from ..db import SurrealStore, checked_int
from ..embed import Embedder, resolve_embedder
from ..embed.base import embeds_elsewhere, in_this_process
from ..surql import CompiledFilter
from . import plan as plans
from .caches import LRU, RECOUNT_SECONDS, ChunkTotals, Loaded, cache_key
from .config import RetrieverConfig
from .plan import Call, Plan, Query, Start, Wait
from .request import Request, as_list, check_query, checked_embedding, embedding_call
from .results import EMBED, RERANK, RetrievalResult, RetrievedDocument, Timings
from .scope import Scope

#: The largest KNN pool a search grows to while grouping leaves fewer than k documents.
MAX_CANDIDATES = 5000


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
        check_query(query, self.config.max_query_chars)
        k = checked_int("k", k if k is not None else self.config.k, maximum=1000)
        fetch = max(k, self.config.rerank_pool) if self.reranker is not None else k
        narrowed = self.scope.narrow(scope)
        compiled = narrowed.restrict(filters)
        started = None
        if embedding is not None:
            embedding = checked_embedding(embedding, getattr(self.embedder, "dimension", None))
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
                embedding = self._embeddings.remember(query, as_list((yield call)))
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
            request.embedding = list(self._embeddings.remember(request.query, as_list(vector)))
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


def __getattr__(name: str) -> Any:
    """The KNN pool's names, which moved to :mod:`.pool` (imported here on first use: it imports
    this module); kept for the import paths of earlier releases (tests/data/public_imports.txt)."""
    if name in ("FILTERED_POOL", "Pool", "exact_instead", "grow", "pool_used"):
        from . import pool

        return getattr(pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
