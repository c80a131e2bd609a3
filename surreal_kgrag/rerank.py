"""Rerankers: reorder (and rescore) the documents a retriever returned.

Every reranker takes ``rerank(query, documents, *, k=None, query_embedding=None)`` and returns new
``RetrievedDocument`` copies with updated ``score``, best first, at most ``k`` of them; the input list
and its documents are never changed. ``arerank`` is the async twin. Rerankers compose left to right:
``MMRReranker(store) | ConceptOverlapReranker(store)`` (or ``RerankerChain([...])``) runs MMR first and
hands its output to the concept reranker; only the last stage cuts to ``k``.

- :class:`MMRReranker`: maximal marginal relevance over the stored embeddings of each document's best chunk.
- :class:`CrossEncoderReranker`: a sentence-transformers ``CrossEncoder`` scores (query, passage) pairs.
- :class:`LLMReranker`: an OpenAI-compatible chat model orders numbered passages; on any failure the
  input order is kept and a :class:`RerankWarning` says why.
- :class:`ConceptOverlapReranker`: boosts documents whose chunks mention the query's concepts.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import warnings
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ValidationError
from surrealdb import RecordID

from .embed import Embedder, _make_client, resolve_embedder
from .errors import ConfigurationError, KGRagError, ModelNotAvailableError
from .extract import ConceptExtractor, normalise_concept, resolve_extractor
from .retrieval import ChunkHit, RetrievedDocument, Scope
from .store import SurrealStore, checked_int
from .surql import CompiledFilter

if TYPE_CHECKING:
    import openai
    from sentence_transformers import CrossEncoder

__all__ = [
    "ConceptOverlapReranker",
    "CrossEncoderReranker",
    "LLMReranker",
    "MMRReranker",
    "RerankWarning",
    "Reranker",
    "RerankerChain",
    "RerankerLike",
    "make_reranker",
    "maximal_marginal_relevance",
    "passage_text",
]

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
        k = _checked_k(k)
        return [(stage, None) for stage in self.rerankers[:-1]] + [(self.rerankers[-1], k)]

    def __repr__(self) -> str:
        return " | ".join(repr(stage) for stage in self.rerankers)


class _RankingReranker(Reranker):
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
        docs, k, vector = _checked_call(query, documents, k, query_embedding)
        return _apply(docs, self._rank(query, docs, vector), k) if docs else []

    async def arerank(
        self,
        query: str,
        documents: Sequence[RetrievedDocument],
        *,
        k: int | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> list[RetrievedDocument]:
        docs, k, vector = _checked_call(query, documents, k, query_embedding)
        return _apply(docs, await self._arank(query, docs, vector), k) if docs else []

    @abstractmethod
    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking: ...

    async def _arank(
        self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None
    ) -> Ranking:
        return await asyncio.to_thread(self._rank, query, documents, query_embedding)


def _checked_k(k: int | None) -> int | None:
    return None if k is None else checked_int("k", k)


def _checked_call(
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
    return docs, _checked_k(k), vector


def _apply(documents: list[RetrievedDocument], ranking: Ranking, k: int | None) -> list[RetrievedDocument]:
    # deep copies: a caller editing a reranked document's chunks or metadata must not edit the input
    return [documents[i].model_copy(update={"score": float(score)}, deep=True) for i, score in ranking[:k]]


def _by_score(scores: Iterable[float]) -> Ranking:
    """Best first; equal scores keep their input order (sorted() is stable)."""
    return sorted(enumerate(float(s) for s in scores), key=lambda item: -item[1])


def _input_order(documents: list[RetrievedDocument]) -> Ranking:
    return [(i, doc.score) for i, doc in enumerate(documents)]


def _fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"{name} must be a number between 0 and 1, got {value!r}")
    return float(value)


def _best_chunk(document: RetrievedDocument) -> ChunkHit:
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


# --------------------------------------------------------------------------------------------------
# Maximal marginal relevance


def maximal_marginal_relevance(query_vector: np.ndarray, vectors: np.ndarray, lambda_mult: float) -> Ranking:
    """Greedy MMR over all rows of ``vectors``; returns every row with the MMR value it was picked at.

    Each step picks ``argmax lambda * sim(query, d) - (1 - lambda) * max sim(d, picked)`` (cosine
    similarities). Negative similarities to picked rows count as no redundancy, so the values are
    non-increasing: a valid score order. Ties go to the earlier row.
    """
    query = _unit(np.asarray(query_vector, dtype=np.float32)[None, :])[0]
    rows = _unit(np.asarray(vectors, dtype=np.float32))
    relevance = rows @ query
    similarity = rows @ rows.T
    redundancy = np.zeros(len(rows), dtype=np.float32)
    available = np.ones(len(rows), dtype=bool)
    ranking: Ranking = []
    for _ in range(len(rows)):
        values = lambda_mult * relevance - (1.0 - lambda_mult) * redundancy
        pick = int(np.argmax(np.where(available, values, -np.inf)))
        ranking.append((pick, float(values[pick])))
        available[pick] = False
        redundancy = np.maximum(redundancy, similarity[pick])
    return ranking


def _unit(array: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)


class _StoreReader:
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


class MMRReranker(_StoreReader, _RankingReranker):
    """Maximal marginal relevance: relevant to the query, different from what is already picked.

    Relevance is the cosine similarity of the query embedding (``query_embedding``, else the
    ``embedder``'s embedding of the query) to the stored embedding of each document's best chunk;
    redundancy is the similarity between those chunk embeddings, fetched in one query.
    ``lambda_mult=1`` ranks by relevance alone, ``0`` by diversity alone. Scores become the MMR value.
    Use the embedder the store was built with. Embeddings are read within ``scope`` (and the scope
    of the search the reranker serves): a chunk outside it is treated as absent.
    """

    def __init__(
        self, store: SurrealStore, embedder: Embedder | Any = None, lambda_mult: float = 0.5, scope: Scope | None = None
    ) -> None:
        self.store = store
        self.embedder = resolve_embedder(embedder)
        self.lambda_mult = _fraction("lambda_mult", lambda_mult)
        self.scope = _store_scope(store, scope)

    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking:
        if query_embedding is None:
            query_embedding = self.embedder.embed_query(query)
        rows = self._query("chunk_embeddings", _best_chunk_ids(documents))
        return self._select(query_embedding, documents, rows)

    async def _arank(
        self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None
    ) -> Ranking:
        if query_embedding is None:
            query_embedding = await self.embedder.aembed_query(query)
        rows = await self._aquery("chunk_embeddings", _best_chunk_ids(documents))
        return self._select(query_embedding, documents, rows)

    def _select(self, query_embedding: np.ndarray, documents: list[RetrievedDocument], rows: list[dict[str, Any]]) -> Ranking:
        stored = {row["id"].id: row["embedding"] for row in rows}
        vectors = []
        for doc in documents:
            chunk_id = _best_chunk(doc).id
            if chunk_id not in stored:
                raise KGRagError(
                    f"chunk {chunk_id!r} of document {doc.id!r} is not in the store (re-ingested or deleted "
                    "since it was retrieved); search again before reranking"
                )
            vectors.append(stored[chunk_id])
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.shape[1] != len(query_embedding):
            raise KGRagError(
                f"the query embedding has {len(query_embedding)} dimensions but the stored chunks have "
                f"{matrix.shape[1]}; give MMRReranker the embedder the store was built with"
            )
        return maximal_marginal_relevance(query_embedding, matrix, self.lambda_mult)

    def __repr__(self) -> str:
        return f"MMRReranker(lambda_mult={self.lambda_mult})"


def _scoped_read(ids: list[RecordID], scope: Scope) -> tuple[dict[str, Any], dict[str, CompiledFilter]]:
    """Params and placeholders of a read of chunks by id within ``scope``."""
    condition = scope.compile()
    return {"ids": ids, **condition.params}, {"filter": condition}


def _store_scope(store: SurrealStore, scope: Scope | None) -> Scope:
    """``scope``, also restricted to a record user's labels on a store signed in as one."""
    return Scope.of(scope).narrow(Scope(record_user=bool(store.config.access)))


def _best_chunk_ids(documents: list[RetrievedDocument]) -> list[RecordID]:
    return [RecordID("chunk", _best_chunk(doc).id) for doc in documents]


# --------------------------------------------------------------------------------------------------
# Cross-encoder


class CrossEncoderReranker(_RankingReranker):
    """Scores (query, passage) pairs with a sentence-transformers ``CrossEncoder``, in batches.

    ``model`` is a loaded ``CrossEncoder`` or a model name / local folder, loaded on first use with
    ``device``, ``local_files_only`` and ``model_kwargs`` (passed to ``CrossEncoder(...)``). The
    passage is :func:`passage_text` (title and the ``chunks`` best chunks). Scores become
    ``model.predict`` outputs (after the model's activation, e.g. a sigmoid).
    """

    def __init__(
        self,
        model: str | CrossEncoder,
        *,
        batch_size: int = 32,
        chunks: int = 1,
        title: bool = True,
        device: str | None = None,
        local_files_only: bool = False,
        model_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if isinstance(model, str):
            if not model.strip():
                raise ConfigurationError("model name must not be empty")
            self._model: CrossEncoder | None = None
        elif callable(getattr(model, "predict", None)):
            self._model = model
        else:
            raise ConfigurationError(f"model must be a CrossEncoder or a model name, not {type(model).__name__}")
        self._source = model if isinstance(model, str) else None
        self.batch_size = checked_int("batch_size", batch_size)
        self.chunks = checked_int("chunks", chunks)
        self.title = bool(title)
        self.device = device
        self.local_files_only = bool(local_files_only)
        self.model_kwargs = dict(model_kwargs or {})
        # A fast tokenizer fails ("Already borrowed") when two threads use it at once.
        self._lock = threading.Lock()

    @property
    def model(self) -> CrossEncoder:
        """The loaded model (loads it on first access)."""
        with self._lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> CrossEncoder:
        from sentence_transformers import CrossEncoder

        try:
            return CrossEncoder(
                self._source, device=self.device, local_files_only=self.local_files_only, **self.model_kwargs
            )
        except OSError as exc:
            raise ModelNotAvailableError(
                f"cross-encoder {self._source!r} is not available: {exc}. Pass a local model folder, a loaded "
                "CrossEncoder, or a model name that can be downloaded."
            ) from exc

    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking:
        pairs = [(query, passage_text(doc, chunks=self.chunks, title=self.title)) for doc in documents]
        model = self.model
        with self._lock:
            scores = np.asarray(
                model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True)
            )
        if scores.ndim == 2 and scores.shape[1] == 1:
            scores = scores[:, 0]
        if scores.shape != (len(pairs),):
            raise ConfigurationError(
                f"cross-encoder returned scores of shape {scores.shape} for {len(pairs)} pairs; a reranking "
                "model must give one score per pair (num_labels=1)"
            )
        return _by_score(scores)

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({self._source or type(self._model).__name__!r})"


# --------------------------------------------------------------------------------------------------
# LLM

_LLM_SYSTEM_PROMPT = (
    "You rank passages by how well they answer a search query. Reply with a JSON object only, of the "
    'form {"ranking": [passage numbers, most relevant first]}, listing every passage number once.'
)


class _LLMRanking(BaseModel):
    ranking: list[int]


class LLMReranker(_RankingReranker):
    """Asks an OpenAI-compatible chat model to order numbered passages, as JSON ``{"ranking": [...]}``.

    Unknown and repeated numbers in the reply are ignored; passages it leaves out follow in input
    order. Reranked documents score ``(n - position) / n``. On any failure (HTTP error, timeout,
    a reply that is not JSON or not that shape) the input order and scores are kept and a
    :class:`RerankWarning` gives the reason. ``api_key`` defaults to the SDK's ``OPENAI_API_KEY``.
    ``json_mode`` sends ``response_format={"type": "json_object"}`` (for servers that support it).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.0,
        chunks: int = 1,
        title: bool = True,
        max_passage_chars: int = 2000,
        json_mode: bool = False,
        system_prompt: str = _LLM_SYSTEM_PROMPT,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.model = model
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_retries = checked_int("max_retries", max_retries, minimum=0)
        self.temperature = float(temperature)
        self.chunks = checked_int("chunks", chunks)
        self.title = bool(title)
        self.max_passage_chars = checked_int("max_passage_chars", max_passage_chars, maximum=1_000_000)
        self.json_mode = bool(json_mode)
        self.system_prompt = system_prompt
        self._api_key = api_key
        self._client: openai.OpenAI | None = None
        # httpx async clients are bound to the event loop that first used them.
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking:
        import openai

        if self._client is None:
            self._client = _make_client(openai.OpenAI, self._client_options())
        try:
            response = self._client.chat.completions.create(**self._request(query, documents))
        except openai.APIError as exc:
            return self._fallback(documents, f"the request failed: {exc}")
        return self._ranking(response, documents)

    async def _arank(
        self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None
    ) -> Ranking:
        import openai

        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            client = self._async_clients[loop] = _make_client(openai.AsyncOpenAI, self._client_options())
        try:
            response = await client.chat.completions.create(**self._request(query, documents))
        except openai.APIError as exc:
            return self._fallback(documents, f"the request failed: {exc}")
        return self._ranking(response, documents)

    def close(self) -> None:
        """Close the synchronous HTTP client (async clients close with their event loop)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _client_options(self) -> dict[str, Any]:
        # None lets the SDK use OPENAI_API_KEY / OPENAI_BASE_URL, then its defaults
        return {"api_key": self._api_key, "base_url": self.base_url, "timeout": self.timeout, "max_retries": self.max_retries}

    def _request(self, query: str, documents: list[RetrievedDocument]) -> dict[str, Any]:
        passages = "\n\n".join(
            f"[{i}] {passage_text(doc, chunks=self.chunks, title=self.title)[: self.max_passage_chars]}"
            for i, doc in enumerate(documents, start=1)
        )
        request: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": f"Query: {query}\n\nPassages:\n{passages}"},
            ],
        }
        if self.json_mode:
            request["response_format"] = {"type": "json_object"}
        return request

    def _ranking(self, response: Any, documents: list[RetrievedDocument]) -> Ranking:
        choices = getattr(response, "choices", None) or []
        content = choices[0].message.content if choices else None
        if not content:
            return self._fallback(documents, "the reply had no content")
        try:
            numbers = _LLMRanking.model_validate(_json_object(content)).ranking
        except (json.JSONDecodeError, ValidationError) as exc:
            return self._fallback(documents, f"the reply is not JSON of the form {{\"ranking\": [numbers]}}: {exc}")
        order = list(dict.fromkeys(n - 1 for n in numbers if 1 <= n <= len(documents)))
        if not order:
            return self._fallback(documents, f"the reply named no passage number between 1 and {len(documents)}")
        n = len(documents)
        named = set(order)
        order += [i for i in range(n) if i not in named]
        return [(i, (n - position) / n) for position, i in enumerate(order)]

    def _fallback(self, documents: list[RetrievedDocument], reason: str) -> Ranking:
        warnings.warn(f"{self!r} kept the input order: {reason}", RerankWarning, stacklevel=4)
        return _input_order(documents)

    def __repr__(self) -> str:
        return f"LLMReranker({self.model!r})"


def _json_object(text: str) -> Any:
    """Parse a reply that should be JSON, also when the model wrapped it in prose or a code fence."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise
        return json.loads(text[start : end + 1])


# --------------------------------------------------------------------------------------------------
# Concept overlap


class ConceptOverlapReranker(_StoreReader, _RankingReranker):
    """Boosts documents whose retrieved chunks mention the concepts found in the query.

    The query's concepts come from ``extractor`` (default: the spaCy extractor) with the names
    normalised as at ingest; each document's concepts are those its chunks in the result mention
    (``MENTIONS_CONCEPT`` edges, one query). Score = ``(1 - weight) * min-max normalised input score
    + weight * fraction of the query's concepts the document mentions``; ties keep the input order.
    A query with no concepts leaves the order unchanged. Chunks are read within ``scope`` (and the
    scope of the search the reranker serves).
    """

    def __init__(
        self, store: SurrealStore, extractor: ConceptExtractor | Any = None, weight: float = 0.5, scope: Scope | None = None
    ) -> None:
        self.store = store
        self.extractor = resolve_extractor(extractor)
        self.weight = _fraction("weight", weight)
        self.scope = _store_scope(store, scope)

    def query_concepts(self, query: str) -> list[str]:
        """The normalised concept names of the query, in order of first mention."""
        names = (normalise_concept(m.name, keep_numeric=True) for m in self.extractor.extract([query])[0])
        return list(dict.fromkeys(name for name in names if name))

    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking:
        wanted = self.query_concepts(query)
        rows = self._query("chunk_concepts", _chunk_ids(documents)) if wanted else []
        return self._combine(documents, wanted, rows)

    async def _arank(
        self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None
    ) -> Ranking:
        wanted = await asyncio.to_thread(self.query_concepts, query)
        rows = await self._aquery("chunk_concepts", _chunk_ids(documents)) if wanted else []
        return self._combine(documents, wanted, rows)

    def _combine(self, documents: list[RetrievedDocument], wanted: list[str], rows: list[dict[str, Any]]) -> Ranking:
        mentioned = {row["id"].id: set(row["concepts"] or ()) for row in rows}
        scores = np.array([doc.score for doc in documents], dtype=np.float64)
        spread = scores.max() - scores.min()
        normalised = (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
        combined = []
        for doc, base in zip(documents, normalised):
            concepts = set().union(*(mentioned.get(chunk.id, set()) for chunk in doc.chunks))
            overlap = len(concepts.intersection(wanted)) / len(wanted) if wanted else 0.0
            combined.append((1.0 - self.weight) * base + self.weight * overlap)
        return _by_score(combined)

    def __repr__(self) -> str:
        return f"ConceptOverlapReranker(weight={self.weight})"


def _chunk_ids(documents: list[RetrievedDocument]) -> list[RecordID]:
    ids = dict.fromkeys(chunk.id for doc in documents for chunk in doc.chunks)
    return [RecordID("chunk", chunk_id) for chunk_id in ids]


# --------------------------------------------------------------------------------------------------
# By name (CLI, config files)

_STORE_RERANKERS: dict[str, type[MMRReranker] | type[ConceptOverlapReranker]] = {
    "mmr": MMRReranker,
    "concept": ConceptOverlapReranker,
}
_MODEL_RERANKERS: dict[str, type[CrossEncoderReranker] | type[LLMReranker]] = {
    "cross-encoder": CrossEncoderReranker,
    "llm": LLMReranker,
}


def make_reranker(name: str, store: SurrealStore | None = None, **options: Any) -> Reranker:
    """A reranker by name, with its constructor's options: ``"mmr"`` and ``"concept"`` need
    ``store``; ``"cross-encoder"`` and ``"llm"`` need ``model=``. For a chain, join the results:
    ``RerankerChain(make_reranker(n, store) for n in names)``."""
    if name in _STORE_RERANKERS:
        if store is None:
            raise ConfigurationError(f"the {name!r} reranker reads the store: pass store=")
        return _STORE_RERANKERS[name](store, **options)
    if name in _MODEL_RERANKERS:
        if "model" not in options:
            raise ConfigurationError(f"the {name!r} reranker needs model= (a model name, path or object)")
        return _MODEL_RERANKERS[name](**options)
    known = ", ".join([*_STORE_RERANKERS, *_MODEL_RERANKERS])
    raise ConfigurationError(f"unknown reranker {name!r}: choose one of {known}")
