"""``SurrealKGRetriever``: a LangChain retriever over a surreal-kgrag store.

All retrieval logic is the core's (``surreal_kgrag.retrieval``); this module only translates its typed
results into LangChain ``Document``s: one ``Document`` per retrieved *document* (so ``k`` counts
documents, as in the core), whose text is that document's best matching chunks.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr, field_validator

from surreal_kgrag import IngestConfig, Ingestor, RetrievalResult, RetrievedDocument, Scope
from surreal_kgrag.db import checked_int
from surreal_kgrag.lazy import LazyRetriever
from surreal_kgrag.loaders import from_langchain
from surreal_kgrag.retrieval import BaseRetriever as CoreRetriever
from surreal_kgrag.retrieval.config import DEFAULT_MODE
from surreal_kgrag.retrieval.filters import compile_filter
from surreal_kgrag.vectors import awrite_documents, write_documents

CHUNK_SEPARATOR = "\n\n"
#: A filter in the core's language (``surreal_kgrag.retrieval.filters``), e.g. ``{"metadata.year": {"$gte": 2000}}``.
Filter = dict[str, Any]
#: Fields the core retriever is built from: setting one on a built retriever builds a new core.
#: ``k``, ``filters``, ``access`` and ``max_chunks_per_document`` are read on every call and need no rebuild.
CORE_FIELDS = frozenset({"db_url", "mode", "namespace", "database", "username", "password", "embedder", "reranker", "retriever_options"})

# Settings-built retrievers with equal core fields share one core. LangChain's configurable_fields
# builds a new retriever from the fields on every call: each would otherwise open its own store and
# model and never close them (and on mem:// search a new, empty database).
_shared_lock = threading.Lock()
_shared: list[tuple[dict[str, Any], weakref.ref[LazyRetriever]]] = []


def _shared_core(settings: dict[str, Any], build: Callable[[], LazyRetriever]) -> LazyRetriever:
    with _shared_lock:
        _shared[:] = [(held, ref) for held, ref in _shared if ref() is not None]
        for held, ref in _shared:
            lazy = ref()
            if lazy is not None and held == settings:
                return lazy
        lazy = build()
        _shared.append((settings, weakref.ref(lazy)))
        return lazy


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

    Fields are validated on assignment too. Setting a field the core is built from (``CORE_FIELDS``:
    ``db_url``, ``mode``, the sign-in settings, ``embedder``, ``reranker``, ``retriever_options``)
    builds a new core on the next call; ``k``, ``filters``, ``access`` and
    ``max_chunks_per_document`` apply from the next call. A retriever made by
    :meth:`from_retriever` wraps the caller's core: its core fields cannot be set.

    Retrievers built from equal core fields in one process share one core (store and models), so
    the copies ``configurable_fields`` makes on every call search the same store; it is closed by
    :meth:`close` (a later call reopens it) or once nothing holds it any more.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True)

    db_url: str | None = Field(
        None, description="mem://, surrealkv://path, ws(s):// or http(s)://; None: $SURREAL_KGRAG_URL or the default embedded store"
    )
    mode: str = Field(DEFAULT_MODE, description="a mode the core's make_retriever accepts (chunk, concept, hybrid, graph)")
    k: int = Field(4, ge=1, le=1000, description="documents returned (overridden per call by invoke(query, k=...))")
    namespace: str | None = None
    database: str | None = None
    username: str | None = None
    password: SecretStr | None = None
    embedder: Any = Field(
        None,
        description="None (MiniLM), a model name, 'openai:<model>', a LangChain Embeddings or a core Embedder; must match the store's",
    )
    filters: Filter | None = Field(
        None, description="a filter every document read must match, e.g. {'metadata.year': {'$gte': 2000}} (checked when set)"
    )
    access: list[str] | None = Field(
        None,
        description="access labels: only documents carrying one of them are ever read (None: no label restriction, []: nothing)",
    )
    reranker: Any = Field(None, description="an object with rerank(query, documents, *, k, query_embedding=None)")
    retriever_options: dict[str, Any] = Field(
        default_factory=dict, description="other core RetrieverConfig fields: candidates, ef, threshold"
    )
    max_chunks_per_document: int = Field(3, ge=1, description="chunks of a document joined into page_content")
    wrapped_core: Any = Field(
        None,
        exclude=True,
        repr=False,
        description="the core retriever from_retriever() wraps: a field, so a copy LangChain builds from the fields "
        "(configurable_fields) searches the same store",
    )

    _lazy: LazyRetriever = PrivateAttr()

    @field_validator("filters")
    @classmethod
    def _check_filters(cls, value: Filter | None) -> Filter | None:
        compile_filter(value)  # a bad filter fails here, not on the first search
        return value

    def model_post_init(self, context: Any, /) -> None:
        if self.wrapped_core is None:
            self._lazy = self._build()
            return
        defaults = {name: field.get_default(call_default_factory=True) for name, field in type(self).model_fields.items()}
        changed = sorted(name for name in CORE_FIELDS - {"mode"} if getattr(self, name) != defaults[name])
        if changed or self.mode != self.wrapped_core.mode:
            raise ValueError(
                f"{', '.join(changed) or 'mode'} of a retriever made by from_retriever() is the wrapped core retriever's; "
                "build a new one instead"
            )
        self._lazy = LazyRetriever.wrap(self.wrapped_core)

    def _build(self) -> LazyRetriever:
        # The scope (access, filters) is applied per call, so changing it needs no new core.
        return _shared_core({name: getattr(self, name) for name in CORE_FIELDS}, self._new_core)

    def _new_core(self) -> LazyRetriever:
        return LazyRetriever(
            self.mode,
            url=self.db_url,
            namespace=self.namespace,
            database=self.database,
            username=self.username,
            password=self.password.get_secret_value() if self.password else None,
            embedder=self.embedder,
            k=self.k,
            reranker=self.reranker,
            options=self.retriever_options,
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "wrapped_core" or (name in CORE_FIELDS and self.wrapped_core is not None):
            raise ValueError(f"{name} of a retriever made by from_retriever() is the wrapped core retriever's; build a new one instead")
        super().__setattr__(name, value)
        if name in CORE_FIELDS:
            self._lazy = self._build()  # the old core's store is released once nothing holds it

    def __getstate__(self) -> dict[Any, Any]:
        self._lazy.check_picklable()  # before pydantic reaches wrapped_core, the caller's live store
        return super().__getstate__()

    @classmethod
    def from_retriever(cls, retriever: CoreRetriever, **kwargs: Any) -> SurrealKGRetriever:
        """Wrap a core retriever (its store, mode, embedder, reranker and ``k``); the caller keeps
        owning the store. ``k``, ``access``, ``filters`` (both narrow the core's scope) and
        ``max_chunks_per_document`` may be given; the core's own settings may not."""
        refused = sorted(set(kwargs) & (CORE_FIELDS | {"wrapped_core"}))
        if refused:
            raise TypeError(
                f"from_retriever() takes the core retriever's own {', '.join(refused)}; "
                "set them on the core retriever, or build SurrealKGRetriever(...) from settings"
            )
        kwargs.setdefault("k", retriever.config.k)
        return cls(mode=retriever.mode, wrapped_core=retriever, **kwargs)

    @property
    def core(self) -> CoreRetriever:
        """The core retriever, built (with its store) on first use, narrowed to ``access`` and
        ``filters``, with this retriever's ``k`` as its default (a shared core was built with the
        first retriever's)."""
        core = self._lazy.retriever.narrowed(Scope(access=self.access, filters=self.filters))
        if core.config.k == self.k:
            return core
        core = copy.copy(core)
        core.config = core.config.model_copy(update={"k": self.k})
        return core

    # -- retrieval -------------------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filters: Filter | None = None,
    ) -> list[Document]:
        core = self.core
        return self._to_documents(core, core.search(query, **self._search_args(k, filters)))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filters: Filter | None = None,
    ) -> list[Document]:
        core = self.core
        return self._to_documents(core, await core.asearch(query, **self._search_args(k, filters)))

    def _search_args(self, k: int | None, filters: Filter | None) -> dict[str, Any]:
        args: dict[str, Any] = {"k": self.k if k is None else checked_int("k", k, maximum=1000)}
        if filters is not None:
            args["filters"] = filters
        return args

    def _to_documents(self, core: CoreRetriever, result: RetrievalResult) -> list[Document]:
        # group_by="chunk" returns a document once per chunk: each Document is then its chunk, by id
        per_chunk = core.config.group_by == "chunk"
        return [self._to_document(doc, result.mode, per_chunk) for doc in result.documents]

    def _to_document(self, doc: RetrievedDocument, mode: str, per_chunk: bool = False) -> Document:
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
            # Per chunk (in chunk_ids order): [first page, last page] of a paged file (else None) and
            # its section path joined with " > " ("" when unknown).
            "chunk_pages": [None if c.page_start is None else [c.page_start, c.page_end] for c in chunks],
            "chunk_sections": [" > ".join(c.section) for c in chunks],
            "provenance": [path.model_dump() for path in doc.provenance],
        }
        document_id = chunks[0].id if per_chunk and chunks else doc.id
        return Document(id=document_id, page_content=CHUNK_SEPARATOR.join(c.content for c in chunks), metadata=metadata)

    # -- ingestion and lifecycle ------------------------------------------------------------------

    def add_documents(self, documents: Iterable[Document], *, extractor: Any = None, config: IngestConfig | None = None) -> list[str]:
        """Ingest LangChain ``Document``s into this retriever's store with its embedder; returns the
        ids stored, in order.

        A document's id is its ``id`` when set (re-adding it updates it in place), otherwise a hash
        of its text. ``metadata["access"]`` (a list of labels) becomes its access labels. A scoped
        retriever (``access``, ``filters``) writes only under its own labels (a document without any
        gets them) and never replaces a document it cannot read: such a document is reported, by
        id, in the ``VectorWriteError``.
        ``extractor`` picks the concept extractor (default: spaCy). When some documents cannot be
        stored, the others are and ``surreal_kgrag.vectors.VectorWriteError`` names them.
        """
        return write_documents(self._writer(extractor, config), [from_langchain(d) for d in documents])

    async def aadd_documents(
        self, documents: Iterable[Document], *, extractor: Any = None, config: IngestConfig | None = None
    ) -> list[str]:
        return await awrite_documents(self._writer(extractor, config), [from_langchain(d) for d in documents])

    def _writer(self, extractor: Any, config: IngestConfig | None) -> Ingestor:
        return self._lazy.ingestor(extractor, config, Scope(access=self.access, filters=self.filters))

    def close(self) -> None:
        """Close the store if this retriever opened it (not one given through ``from_retriever``),
        for every retriever sharing its core; the next call opens it again."""
        self._lazy.close()

    async def aclose(self) -> None:
        await self._lazy.aclose()
