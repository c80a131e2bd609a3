"""A retriever described by settings and built on first use.

The framework integrations (LangChain, LlamaIndex) hold one of these, so constructing them never
touches the database, and they share how a store is opened, ingested into and closed.
"""

from __future__ import annotations

import threading
from typing import Any

from .db import SurrealStore
from .ingest import IngestConfig, Ingestor
from .retrieval import BaseRetriever, Scope, check_retriever_options, make_retriever


class LazyRetriever:
    """``make_retriever(mode, SurrealStore(url, ...), ...)``, run on the first access to ``.retriever``.

    ``filters``, ``access`` and ``reranker`` are passed to ``make_retriever`` only when set (``access``
    and ``filters`` are the retriever's scope: what every search may read). A store this object
    opened is closed by ``close()``, or once nothing holds it any more (neither this object nor a
    retriever on it); one given through :meth:`wrap` belongs to the caller.

    A deep copy is this object (a live store is not copied: the copy searches the same one). A
    pickled one carries its settings and opens its own store on first use; one made by :meth:`wrap`
    holds the caller's live store and cannot be pickled.
    """

    def __init__(
        self,
        mode: str,
        *,
        url: str | None = None,
        namespace: str | None = None,
        database: str | None = None,
        username: str | None = None,
        password: str | None = None,
        embedder: Any = None,
        k: int = 5,
        filters: Any = None,
        access: list[str] | None = None,
        reranker: Any = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        check_retriever_options(mode, k=k, filters=filters, access=access, **(options or {}))  # before any store opens
        self.mode = mode
        self._store_args: dict[str, Any] = {"namespace": namespace, "database": database, "username": username, "password": password}
        self.url = url
        self._retriever_args: dict[str, Any] = {"embedder": embedder, "k": k, **(options or {})}
        given = (("filters", filters), ("access", access), ("reranker", reranker))
        self._retriever_args.update({name: value for name, value in given if value is not None})
        self._retriever: BaseRetriever | None = None
        self._owns_store = False
        self._lock = threading.Lock()

    @classmethod
    def wrap(cls, retriever: BaseRetriever) -> LazyRetriever:
        lazy = cls(retriever.mode, k=retriever.config.k)
        lazy._retriever = retriever
        return lazy

    def __deepcopy__(self, memo: dict[int, Any]) -> LazyRetriever:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        self.check_picklable()
        return (_rebuild, (self.mode, self.url, self._store_args, self._retriever_args))

    def check_picklable(self) -> None:
        """Raise ``TypeError`` for one made by :meth:`wrap`: it holds the caller's live store."""
        with self._lock:
            wrapped = self._retriever is not None and not self._owns_store
        if wrapped:
            raise TypeError(
                "a retriever wrapping a core retriever holds the caller's open store and cannot be pickled; "
                "build it from connection settings (db_url=...) instead"
            )

    @property
    def retriever(self) -> BaseRetriever:
        with self._lock:
            if self._retriever is None:
                store = SurrealStore(self.url, **self._store_args)
                try:
                    self._retriever = make_retriever(self.mode, store, **self._retriever_args)
                except BaseException:
                    store.close()
                    raise
                self._owns_store = True
                store.close_when_collected()
            return self._retriever

    def ingestor(self, extractor: Any = None, config: IngestConfig | None = None, scope: Scope | None = None) -> Ingestor:
        """An ``Ingestor`` on the retriever's store with the retriever's embedder, writing within
        the retriever's scope narrowed by ``scope`` (a scoped writer: see ``surreal_kgrag.ingest.scoped``)."""
        retriever = self.retriever
        return Ingestor(
            retriever.store, embedder=retriever.embedder, extractor=extractor, config=config, scope=retriever.scope.narrow(scope)
        )

    def close(self) -> None:
        retriever = self._release()
        if retriever is not None:
            retriever.store.close()

    async def aclose(self) -> None:
        retriever = self._release()
        if retriever is not None:
            await retriever.store.aclose()

    def _release(self) -> BaseRetriever | None:
        with self._lock:
            if not self._owns_store:
                return None
            retriever, self._retriever, self._owns_store = self._retriever, None, False
            return retriever


def _rebuild(mode: str, url: str | None, store_args: dict[str, Any], retriever_args: dict[str, Any]) -> LazyRetriever:
    lazy = LazyRetriever(mode, url=url, **store_args)
    lazy._retriever_args = retriever_args
    return lazy
