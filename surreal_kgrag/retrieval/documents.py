"""The document channel: documents the question names, by what identifies them, and their passages.

A question about a long document names it the way its title, file name and cover do: a company and
a quarter, a product, a report's subject. :mod:`surreal_kgrag.identity` stores those names on each
document; here the question's n-grams and periods are looked up among them
(``document_names.surql``: one record read a name in the engine-kept ``document_name_count`` view,
then a range read for each name some document carries). Each matched name weighs its rarity over
documents (a name every document carries weighs nothing; one ``per_name`` or more documents carry
is a hub and skipped), and a document scores the sum over the names it carries, whatever its
length. Documents named equally share the mean of their places in the channel (rank fusion reads
places, and nothing orders them), but a question asking for the latest document puts the newest of
equally named documents first.
A name the question writes all in lower case is a common word ("how do I *copy* a tree", "which
*function*") when the question writes anything with a capital: its writer capitalises names, so the
word names nothing. In a question written all in lower case any word may be a name: one weighs
``LOWERCASE`` times a name, and a document it alone names carries that share of the channel's weight
in the fusion, which ranks by position and would otherwise put it level with a document named
properly.

The channel ranks documents of ``document_min_chunks`` chunks or more: a passage shorter than that
is its own identity already (its chunks are embedded and full-text indexed under its title, and its
title is a concept the graph walks from), so the channel would only count that evidence twice. On
short titled passages it cost the graph mode 2.6 points of recall@5 on MuSiQue, whose questions name
distractor passages by title on purpose.

The channel's hits are each named document's best passages for the question
(``fragments/named_passages.surql``), so a long document enters the ranking with the chunks that
answer, not its first ones. They are taken from the ``document_passage_pool`` chunks nearest to the
question in the store, where a document's chunks are its best ones, and by exact cosine over the
document's own chunks when it has none there, which costs in proportion to its length (so the
documents scanned, best named first, hold at most ``exact_scan_chunks`` chunks together, the first
whatever its length; one left out has no passages). That pool is
the search's own KNN, raised to the pool's size: one KNN, not two. The modes fuse the channel with
their others (weight ``weights["document"]``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, NamedTuple

from .. import identity, phrases
from ..db.sdk import RecordID
from .fusion import Hit
from .plan import Query

#: Weight factor of a name a question written all in lower case contains ("what did apple report"):
#: a common word far more often than a name (the graph mode's ``question_lowercase``).
LOWERCASE = 0.1


def lowercase_factor(query: str) -> float:
    """What a name the question writes in lower case weighs beside one it capitalises: nothing when
    the question has a capital letter anywhere (its writer capitalises names), ``LOWERCASE`` when it
    has none. On the reference-manual sets a lower-case word named a page only wrongly ("lock",
    "integer", "insert"); on the other sets it named none that mattered."""
    return LOWERCASE if not any(ch.isupper() for ch in query) else 0.0


class Named(NamedTuple):
    """A document the question names: its key, the summed rarity of its names, its date (for
    ``latest``), how surely the question names it (1 through a name it writes as one, capitalised, or
    a period; ``lowercase``, :func:`scores`, through lower-case words alone), and its place in the
    channel (1 = first; see :func:`with_places`)."""

    doc: str
    score: float
    date: str
    quality: float
    place: float | None = None


def question_names(query: str) -> tuple[list[phrases.Span], list[str]]:
    """The question's candidate n-grams and the periods it names."""
    return phrases.spans(query, plurals=True), identity.periods(query)


def name_lookup(spans: list[phrases.Span], periods: list[str], per_name: int, counted: bool, request: Any) -> Query:
    """The lookup of the question's names; ``counted``: the store keeps the ``document_name_count``
    view (schema 11 on), an older one has each name's rows counted."""
    names = list(dict.fromkeys([*phrases.names(spans), *periods]))
    params = {"names": names, "per_name": per_name, "counted": counted, **request.filter.params}
    return Query("document_names", params, {"filter": request.filter})


def scores(
    rows: list[dict[str, Any]],
    spans: list[phrases.Span],
    periods: list[str],
    total: int,
    per_name: int,
    latest: bool,
    min_chunks: int = 1,
    lowercase: float = LOWERCASE,
) -> list[Named]:
    """Named documents of at least ``min_chunks`` chunks, best first: the summed rarity of the names
    each carries (``lowercase`` times it for a name written in lower case: :func:`lowercase_factor`),
    the question's n-grams taken longest first without overlap; with ``latest``, equally named
    documents newest first."""
    found = {row["name"]: row for row in rows if 0 < int(row["n"]) < per_name and row["docs"]}
    quality: dict[str, float] = {p: 1.0 for p in periods if p in found}
    for span in phrases.longest_matches(spans, lambda name: 0 if name in found else None):
        quality[span.name] = max(quality.get(span.name, 0.0), 1.0 if span.capitalised else lowercase)
    quality = {name: factor for name, factor in quality.items() if factor > 0}
    score: dict[str, float] = defaultdict(float)
    surest: dict[str, float] = defaultdict(float)
    dates: dict[str, str] = {}
    for name, factor in quality.items():
        row = found[name]
        n = int(row["n"])
        # `total` is counted once a minute: documents written since can give a name more than that
        weight = factor * math.log((max(total, n) - n + 0.5) / (n + 0.5) + 1.0)
        for hit in row["docs"]:
            if int(hit.get("chunks") or 0) < min_chunks:
                continue
            key = str(hit["doc"].id)
            score[key] += weight
            surest[key] = max(surest[key], factor)
            dates[key] = hit.get("date") or ""
    ranked = list(score)
    if latest:
        ranked.sort(key=lambda d: dates[d], reverse=True)  # newest first, undated ("") last; the sorts are stable
    ranked.sort(key=lambda d: -round(score[d], 9))
    return [Named(doc, score[doc], dates[doc], surest[doc]) for doc in ranked]


def passages(docs: list[str], config: Any, candidates: int) -> tuple[dict[str, Any], int]:
    """The params of the named documents' passages, read with a search's KNN
    (``fragments/named_passages.surql``), and the size of that KNN: the search's own
    ``candidates``, raised to ``document_passage_pool`` when there are documents to read."""
    params = {"docs": [RecordID("document", doc) for doc in docs], "per_doc": config.chunks_per_document, "k": candidates}
    return params, max(candidates, config.document_passage_pool) if docs else candidates


def hits(named: list[Named], passage_rows: list[dict[str, Any]], per_doc: int) -> list[Hit]:
    """The channel's hits: documents in ``named`` order, each with its ``per_doc`` best passages,
    best first, equal ones (a passage repeated in a document) in chunk order (a document whose
    chunks are all outside the scope drops out); each carries its document's ``quality`` as its
    share of the channel's weight and its document's place (:func:`with_places`)."""
    by_doc: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in passage_rows:
        by_doc[str(row["doc"].id)].append(row)
    out = []
    for doc, score, _, quality, place in named:
        for row in sorted(by_doc.get(doc, []), key=lambda r: (-float(r["score"]), str(r["chunk"].id)))[:per_doc]:
            out.append(Hit(doc=doc, chunk=str(row["chunk"].id), score=score, channel="document", weight=quality, place=place))
    return out


def named_documents(
    query: str, rows: list[dict[str, Any]], spans: list[phrases.Span], periods: list[str], total: int, config: Any
) -> list[Named]:
    """The named documents the channel keeps: within ``document_share`` of the best, at most ``document_pool``."""
    latest = identity.asks_latest(query)
    named = scores(
        rows, spans, periods, total, config.document_per_name, latest, config.document_min_chunks, lowercase_factor(query)
    )
    if named:
        least = config.document_share * named[0].score
        named = [item for item in named if item.score >= least][: config.document_pool]
    return with_places(named, latest)


def with_places(named: list[Named], latest: bool) -> list[Named]:
    """``named`` (best first) with their places in the channel: documents named equally share the
    mean of their places, since nothing orders them (a name eight manual pages carry, `WAL`, named
    them in the order the store listed them, and rank fusion gave the first of them a far larger
    share than the eighth). For a question asking for the latest, documents of different dates keep
    places of their own: :func:`scores` put the newest first."""

    def tie(item: Named) -> tuple[float, str]:
        return round(item.score, 9), item.date if latest else ""

    out: list[Named] = []
    start = 0
    while start < len(named):
        end = start + 1
        while end < len(named) and tie(named[end]) == tie(named[start]):
            end += 1
        place = (start + 1 + end) / 2  # the mean of places start + 1 .. end
        out.extend(item._replace(place=place) for item in named[start:end])
        start = end
    return out
