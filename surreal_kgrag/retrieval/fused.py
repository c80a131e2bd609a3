"""What the fused modes (hybrid, graph, concept) share: the question's BM25 words and the names it
contains, the store-wide counts their weights need, the documents the question names, fusion, and
hydration of the ranked documents with the chunks that led to them."""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import partial
from typing import Any, ClassVar, NamedTuple

from .. import phrases
from ..db import checked_int
from ..db.sdk import RecordID
from ..schema import NAME_COUNTS_SINCE
from ..surql import CompiledFilter
from . import documents
from .base import BaseRetriever
from .caches import RECOUNT_SECONDS, ChunkTotals
from .config import HybridConfig, RetrieverConfig
from .fusion import Hit, chunk_from, fuse, fuse_chunks, per_chunk, top_chunks
from .plan import Compute, Concurrently, Plan, Query
from .pool import Pool
from .request import Request
from .results import HYDRATE, RANK, Channel, RetrievedDocument


class FusedRetriever(BaseRetriever):
    """The template of the modes whose channels are fused into one ranking: their shared queries
    (BM25, the documents the question names), counts, fusion and hydration."""

    embeds_beside = True
    config_class: ClassVar[type[RetrieverConfig]] = HybridConfig
    config: HybridConfig

    def _chunk_total(self, request: Request) -> Plan[ChunkTotals]:
        """Chunks in the request's scope (the N of its concept weights: ``weighed``) and in the store
        (the N a word's store-wide count in the ``term`` table is compared with). With no call
        filter, the same count (cached per condition) chooses the KNN pool."""
        return (yield from self._chunks_inside(request.scope.compile()))

    def _documents_in_store(self) -> Plan[int]:
        """Documents in the store (the N of a document name's rarity), counted again now and then."""
        cached = self._loaded.documents
        if cached is not None and time.monotonic() - cached[1] <= RECOUNT_SECONDS:
            return cached[0]
        total = max(int((yield Query("count_documents"))[-1] or 0), 1)
        self._loaded.documents = (total, time.monotonic())
        return total

    def _uses_documents(self) -> bool:
        return self.config.weights["document"] > 0

    def _name_lookup(self, request: Request, spans: list[phrases.Span], periods: list[str]) -> Plan[Query]:
        """The query of the documents the question names (``document_names.surql``)."""
        counted = yield from self._schema_since(NAME_COUNTS_SINCE)
        return documents.name_lookup(spans, periods, self.config.document_per_name, counted, request)

    def _question(self, query: str) -> Question:
        """The question's BM25 words (none without the BM25 channel), its n-grams and the periods it names."""
        words = content_words(query) if self.config.fulltext else []
        spans, periods = documents.question_names(query)
        return Question(words, spans, periods)

    def _named_documents(
        self, request: Request, rows: list[dict[str, Any]], spans: list[phrases.Span], periods: list[str]
    ) -> Plan[list[documents.Named]]:
        """The documents the question names, from the name lookup's ``rows`` (``document_names.surql``)."""
        total = yield from self._documents_in_store()
        find = partial(documents.named_documents, request.query, rows, spans, periods, total, self.config)
        return (yield Compute(find, RANK))

    def _first_round(
        self, request: Request, question: Question, beside: Callable[[ChunkTotals], tuple[Query, ...]]
    ) -> Plan[tuple[ChunkTotals, Pool, Lexical]]:
        """What a fused search reads before it needs the question's vector: the counts, its KNN
        pool (to be read next, with the passages of the documents the question names), and the
        channels that need no vector, with the mode's own queries ``beside(totals)``."""
        totals = yield from self._chunk_total(request)
        candidates = self._candidates(request)
        passing = yield from self._passing(request)
        pool = Pool(request, candidates, threshold=self.config.threshold, dense=self._dense, passing=passing)
        lexical = yield from self._lexical(request, question, totals, candidates, beside(totals))
        pool.unread = [named.doc for named in lexical.named]
        return totals, pool, lexical

    def _lexical(
        self, request: Request, question: Question, totals: ChunkTotals, candidates: int, beside: tuple[Query, ...] = ()
    ) -> Plan[Lexical]:
        """The channels that need no vector, read together and with the queries ``beside``: the BM25
        hits and the documents the question names (each only when the config asks for it)."""
        words, spans, periods = question
        queries = list(beside)
        if words:
            queries.append(self._text_query(request, words, totals, candidates))
        if self._uses_documents():
            queries.append((yield from self._name_lookup(request, spans, periods)))
        results = list((yield Concurrently(tuple(queries)))) if queries else []
        answers = [results.pop(0)[-1] for _ in beside]
        text = yield Compute(partial(hits_of, results.pop(0)[-1] if words else [], "text"), RANK)
        named = (yield from self._named_documents(request, results.pop(0)[-1], spans, periods)) if self._uses_documents() else []
        return Lexical(answers, text, named)

    def _text_query(self, request: Request, words: list[str], totals: ChunkTotals, candidates: int) -> Query:
        params = {
            "words": words,
            # a word's count (the `term` table) is store-wide, so its limit is a share of the store's chunks
            "max_df": math.ceil(self.config.text_max_df * totals.store),
            "max_matches": self.config.text_max_matches,
            "filtered": bool(request.filter.condition),
            **request.filter.params,
        }
        placeholders: dict[str, int | CompiledFilter] = {"candidates": checked_int("candidates", candidates), "filter": request.filter}
        return Query("search_fulltext", params, placeholders)

    def fuse(self, channels: Mapping[str, list[Hit]]) -> list[tuple[str, float]]:
        """Documents by fused score, best first."""
        return fuse(channels, self.config.weights, self.config.fusion, self.config.rrf_k)

    def _hydrate(
        self, request: Request, ranking: list[tuple[str, float]], channels: Mapping[str, list[Hit]]
    ) -> Plan[list[RetrievedDocument]]:
        ranking = ranking[: request.fetch] if self.config.group_by == "document" else ranking
        shown, params = yield Compute(partial(self._wanted, ranking, channels, request.fetch), HYDRATE)
        out = (yield Query("hydrate_results", {**params, **request.filter.params}, {"filter": request.filter}))[-1]
        return (yield Compute(partial(self._hydrated, request, ranking, shown, out), HYDRATE))

    def _wanted(
        self, ranking: list[tuple[str, float]], channels: Mapping[str, list[Hit]], fetch: int
    ) -> tuple[Shown, dict[str, Any]]:
        """What each ranked document shows (its best chunks by fused score, and every hit that
        led to it), and the documents and chunks to read for them: with ``group_by='chunk'``, only
        the ``fetch`` best of those chunks and their documents."""
        chosen = {doc for doc, _ in ranking}
        hits_by_doc: dict[str, list[Hit]] = defaultdict(list)
        for hits in channels.values():
            for hit in hits:
                if hit.doc in chosen:
                    hits_by_doc[hit.doc].append(hit)
        scores = fuse_chunks(channels, self.config.weights, self.config.fusion, self.config.rrf_k)
        per_doc = self.config.chunks_per_document
        best = {doc: top_chunks(hits, per_doc, scores) for doc, hits in hits_by_doc.items()}
        if self.config.group_by == "chunk":
            best = _best_overall(ranking, best, scores, fetch)
            chosen = set(best)
        params = {
            "documents": [RecordID("document", doc) for doc in chosen],
            "chunks": [RecordID("chunk", chunk) for chunks in best.values() for chunk in chunks],
        }
        return Shown(hits_by_doc, best, scores), params

    def _hydrated(self, request: Request, ranking: list[tuple[str, float]], shown: Shown, out: dict[str, Any]) -> list[RetrievedDocument]:
        """The results, from the rows ``hydrate_results.surql`` read."""
        docs = {str(row["id"].id): row for row in out["documents"]}
        chunks = {str(row["id"].id): row for row in out["chunks"]}
        documents = []
        for doc, score in ranking:
            if doc not in docs:
                continue  # deleted between the two queries (or out of scope, never in practice)
            row = docs[doc]
            hits = shown.hits[doc]
            kept = [chunk_from(chunks[c], hits, shown.scores[c]) for c in shown.best.get(doc, []) if c in chunks]
            if not kept:
                continue  # re-ingested between the two queries: the chunks that matched are gone
            documents.append(
                RetrievedDocument(
                    id=doc,
                    title=row.get("title"),
                    source=row.get("source") or "",
                    metadata=row.get("metadata") or {},
                    chunk_count=row.get("chunk_count"),
                    score=score,
                    chunks=kept,
                    provenance=[path for hit in hits for path in hit.paths()],
                )
            )
        if self.config.group_by == "chunk":
            documents = per_chunk(documents)
        return documents[: request.fetch]


class Question(NamedTuple):
    """What the fused modes read from the question's text: its BM25 words (none without the BM25
    channel), its n-grams and the periods it names."""

    words: list[str]
    spans: list[phrases.Span]
    periods: list[str]


class Lexical(NamedTuple):
    """The channels read before the vector: the answers of the queries read beside them, the BM25
    hits, and the documents the question names."""

    beside: list[Any]
    text: list[Hit]
    named: list[documents.Named]


def _best_overall(
    ranking: list[tuple[str, float]], best: Mapping[str, list[str]], scores: Mapping[str, float], n: int
) -> dict[str, list[str]]:
    """group_by='chunk': the ``n`` best of the documents' ``best`` chunks by fused score, equal ones
    in ranking order, as each document's chunks (:func:`per_chunk` orders them the same way)."""
    pairs = [(doc, chunk) for doc, _ in ranking for chunk in best.get(doc, [])]
    kept = set(sorted(pairs, key=lambda pair: -scores.get(pair[1], 0.0))[:n])
    out: dict[str, list[str]] = defaultdict(list)
    for doc, chunk in pairs:
        if (doc, chunk) in kept:
            out[doc].append(chunk)
    return dict(out)


def pool_found(pairs: Iterable[tuple[str, str]], group_by: str, per_doc: int) -> tuple[int, set[str] | None]:
    """What a pool's hits, as (document, chunk) pairs, can show: the documents, and their keys
    (group_by='document'); or the chunks, at most ``per_doc`` of a document, and no keys ('chunk')."""
    chunks: dict[str, set[str]] = defaultdict(set)
    for doc, chunk in pairs:
        chunks[doc].update([chunk] if chunk else [])
    if group_by == "document":
        return len(chunks), set(chunks)
    return sum(min(len(found), per_doc) for found in chunks.values()), None


class Shown(NamedTuple):
    """What the ranked documents show: each one's hits, its best chunks, and every chunk's fused score."""

    hits: dict[str, list[Hit]]
    best: dict[str, list[str]]
    scores: dict[str, float]


def hits_of(rows: list[dict[str, Any]], channel: Channel) -> list[Hit]:
    """A channel's hits from its rows, best first."""
    return sorted((Hit.of(row, channel) for row in rows), key=lambda h: -h.score)


_WORD = re.compile(r"\w+")


def content_words(text: str) -> list[str]:
    """The query's distinct words minus English stop words, for the BM25 channel: an OR over "the"
    and "which" would match and score nearly every chunk."""
    stop_words: Collection[str]
    try:
        from spacy.lang.en.stop_words import STOP_WORDS as stop_words
    except ImportError:  # spaCy is optional; without it every word is searched
        stop_words = frozenset()
    return list(dict.fromkeys(w for w in _WORD.findall(text.lower()) if w not in stop_words))
