"""The reranker protocol, the base classes and the helpers every built-in reranker shares."""

from __future__ import annotations

import asyncio
import copy
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..db import SurrealStore, checked_int
from ..db.sdk import RecordID
from ..errors import ConfigurationError, KGRagError
from ..retrieval import ChunkHit, RetrievedDocument, Scope
from ..surql import CompiledFilter

#: (position in the input list, new score), best first.
Ranking = list[tuple[int, float]]


class RerankWarning(UserWarning):
    """A reranker could not rerank and returned the documents in their input order."""


@runtime_checkable
class RerankerLike(Protocol):
    """What a retriever needs from a reranker; :class:`Reranker` subclasses are the usual ones."""

    def rerank(
        self,
        query: str,
        documents: Sequence[RetrievedDocument],
        *,
        k: int | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> list[RetrievedDocument]: ...


class Reranker(ABC):
    """Base class: ``rerank``, ``arerank`` (a worker thread unless overridden) and ``a | b`` composition."""

    @abstractmethod
    def rerank(
        self,
        query: str,
        documents: Sequence[RetrievedDocument],
        *,
        k: int | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> list[RetrievedDocument]:
        """New copies of ``documents`` with updated scores, best first, at most ``k`` of them."""

    async def arerank(
        self,
        query: str,
        documents: Sequence[RetrievedDocument],
        *,
        k: int | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> list[RetrievedDocument]:
        return await asyncio.to_thread(self.rerank, query, documents, k=k, query_embedding=query_embedding)

    def scoped(self, scope: Scope) -> Reranker:
        """This reranker restricted to ``scope``; the retriever calls it with each search's scope.
        Rerankers that read the store read within it; the others are returned as they are."""
        return self

    def __or__(self, other: RerankerLike) -> RerankerChain:
        return RerankerChain([self, other])

    def __ror__(self, other: RerankerLike) -> RerankerChain:
        return RerankerChain([other, self])

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RerankerChain(Reranker):
    """Runs rerankers in order, each on the previous one's output; the last one cuts to ``k``.

    Stages may be any object with ``rerank`` (and ideally ``arerank``); nested chains are flattened.
    """

    def __init__(self, rerankers: Iterable[RerankerLike]) -> None:
        stages: list[RerankerLike] = []
        for reranker in rerankers:
            if isinstance(reranker, RerankerChain):
                stages.extend(reranker.rerankers)
            elif callable(getattr(reranker, "rerank", None)):
                stages.append(reranker)
            else:
                raise ConfigurationError(f"{type(reranker).__name__} is not a reranker: it has no rerank() method")
        if not stages:
            raise ConfigurationError("RerankerChain needs at least one reranker")
        self.rerankers: tuple[RerankerLike, ...] = tuple(stages)

    def rerank(
        self,
        query: str,
        documents: Sequence[RetrievedDocument],
        *,
        k: int | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> list[RetrievedDocument]:
        docs = list(documents)
        for stage, stage_k in self._stages(k):
            docs = stage.rerank(query, docs, k=stage_k, query_embedding=query_embedding)
        return docs

    async def arerank(
        self,
        query: str,
        documents: Sequence[RetrievedDocument],
        *,
        k: int | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> list[RetrievedDocument]:
        docs = list(documents)
        for stage, stage_k in self._stages(k):
            arerank = getattr(stage, "arerank", None)
            if arerank is None:
                docs = await asyncio.to_thread(stage.rerank, query, docs, k=stage_k, query_embedding=query_embedding)
            else:
                docs = await arerank(query, docs, k=stage_k, query_embedding=query_embedding)
        return docs

    def scoped(self, scope: Scope) -> RerankerChain:
        stages = [stage.scoped(scope) if isinstance(stage, Reranker) else stage for stage in self.rerankers]
        return RerankerChain(stages)

    def _stages(self, k: int | None) -> list[tuple[RerankerLike, int | None]]:
        """Each stage with the k it gets: only the last one cuts."""
        k = checked_k(k)
        return [(stage, None) for stage in self.rerankers[:-1]] + [(self.rerankers[-1], k)]

    def __repr__(self) -> str:
        return " | ".join(repr(stage) for stage in self.rerankers)


class RankingReranker(Reranker):
    """Template for the built-in rerankers: check the input, compute a :data:`Ranking`
    (``_rank`` / ``_arank``), then copy, rescore and cut the documents."""

    def rerank(
        self,
        query: str,
        documents: Sequence[RetrievedDocument],
        *,
        k: int | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> list[RetrievedDocument]:
        docs, k, vector = checked_call(query, documents, k, query_embedding)
        return _apply(docs, self._rank(query, docs, vector), k) if docs else []

    async def arerank(
        self,
        query: str,
        documents: Sequence[RetrievedDocument],
        *,
        k: int | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> list[RetrievedDocument]:
        docs, k, vector = checked_call(query, documents, k, query_embedding)
        return _apply(docs, await self._arank(query, docs, vector), k) if docs else []

    @abstractmethod
    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking: ...

    async def _arank(
        self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None
    ) -> Ranking:
        return await asyncio.to_thread(self._rank, query, documents, query_embedding)


def checked_k(k: int | None) -> int | None:
    return None if k is None else checked_int("k", k)


def checked_call(
    query: str, documents: Sequence[RetrievedDocument], k: int | None, query_embedding: Sequence[float] | None
) -> tuple[list[RetrievedDocument], int | None, np.ndarray | None]:
    if not isinstance(query, str):
        raise ConfigurationError(f"query must be a str, not {type(query).__name__}")
    docs = list(documents)
    for i, doc in enumerate(docs):
        if not isinstance(doc, RetrievedDocument):
            raise ConfigurationError(f"document {i} is a {type(doc).__name__}, expected RetrievedDocument")
    vector = None
    if query_embedding is not None:
        vector = np.asarray(query_embedding, dtype=np.float32)
        if vector.ndim != 1 or vector.size == 0:
            raise ConfigurationError(f"query_embedding must be a flat list of numbers, got shape {vector.shape}")
    return docs, checked_k(k), vector


def _apply(documents: list[RetrievedDocument], ranking: Ranking, k: int | None) -> list[RetrievedDocument]:
    # deep copies: a caller editing a reranked document's chunks or metadata must not edit the input
    return [documents[i].model_copy(update={"score": float(score)}, deep=True) for i, score in ranking[:k]]


def by_score(scores: Iterable[float]) -> Ranking:
    """Best first; equal scores keep their input order (sorted() is stable)."""
    return sorted(enumerate(float(s) for s in scores), key=lambda item: -item[1])


def input_order(documents: list[RetrievedDocument]) -> Ranking:
    return [(i, doc.score) for i, doc in enumerate(documents)]


def fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"{name} must be a number between 0 and 1, got {value!r}")
    return float(value)


def best_chunk(document: RetrievedDocument) -> ChunkHit:
    if not document.chunks:
        raise KGRagError(f"document {document.id!r} has no chunks to rerank by; rerank results that carry their chunks")
    return max(document.chunks, key=lambda chunk: chunk.score)


def passage_text(document: RetrievedDocument, *, chunks: int = 1, title: bool = True) -> str:
    """The text a reranking model reads for a document: its title, then its ``chunks`` best-scoring
    chunks in document order."""
    best = sorted(document.chunks, key=lambda chunk: -chunk.score)[:chunks]
    parts = [chunk.content for chunk in sorted(best, key=lambda chunk: chunk.index)]
    if title and document.title:
        parts.insert(0, document.title)
    return "\n".join(parts)



class StoreReader:
    """Reads chunks by id within the reranker's scope (``scoped`` narrows it per search)."""

    store: SurrealStore
    scope: Scope

    def scoped(self, scope: Scope) -> Any:
        narrowed = copy.copy(self)
        narrowed.scope = self.scope.narrow(scope)
        return narrowed

    def _query(self, name: str, ids: list[RecordID]) -> list[dict[str, Any]]:
        params, placeholders = _scoped_read(ids, self.scope)
        return self.store.query(name, params, **placeholders)[-1]

    async def _aquery(self, name: str, ids: list[RecordID]) -> list[dict[str, Any]]:
        params, placeholders = _scoped_read(ids, self.scope)
        return (await self.store.aquery(name, params, **placeholders))[-1]


def _scoped_read(ids: list[RecordID], scope: Scope) -> tuple[dict[str, Any], dict[str, CompiledFilter]]:
    """Params and placeholders of a read of chunks by id within ``scope``."""
    condition = scope.compile()
    return {"ids": ids, **condition.params}, {"filter": condition}


def store_scope(store: SurrealStore, scope: Scope | None) -> Scope:
    """``scope``, also restricted to a record user's labels on a store signed in as one."""
    return Scope.of(scope).narrow(Scope(record_user=bool(store.config.access)))
