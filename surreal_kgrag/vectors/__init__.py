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

The modules, along the way a call goes: :mod:`.filters` (the caller's ids checked, metadata filters
put in the core language), :mod:`.store` (:class:`TextStore`: gets, searches and deletes; the texts
it returns) and :mod:`.writes` (texts made into documents and ingested, failures named).
"""

from .filters import metadata_filter
from .store import VECTOR_QUERY, StoredText, TextStore, open_store
from .writes import VectorWriteError, awrite_documents, write_documents

__all__ = [
    "VECTOR_QUERY",
    "StoredText",
    "TextStore",
    "VectorWriteError",
    "awrite_documents",
    "metadata_filter",
    "open_store",
    "write_documents",
]
