"""The KNN pool of one search: how many vectors it reads and ranks, whether it filters them after
the KNN or inside it or scans exactly, and when it grows (filtered HNSW search on SurrealDB 3.2 is
slow, and slower the fewer vectors pass, and can drop true neighbours, surrealdb#7423)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .. import surql
from .base import MAX_CANDIDATES
from .caches import LRU, ChunkTotals, cache_key
from .request import Request

#: How much larger the first pool of a filtered chunk KNN is. Filtered HNSW search on SurrealDB
#: 3.2 drops true neighbours (surrealdb#7423): on a 2,400-chunk store the top 10 of a 10-vector
#: filtered KNN held 78-96% of the exact top 10 (filters passing 1-50% of the chunks); taken from a
#: 40-vector pool it held all of them whenever the filter passed at least 5%.
FILTERED_POOL = 4
#: How long a retriever goes straight to the filtered KNN with a filter it found more documents
#: inside than it counts (``fragments/nearest_chunks.surql``): the count reads that many documents,
#: about 15 ms of a 100 ms filtered search on the short passages.
DENSE_SECONDS = 60.0
#: A filtered search reads the KNN of the whole store and keeps the chunks inside its filter (it
#: post-filters) when the filter passes more chunks than an exact scan reads: this many times the
#: chunks it keeps, over the share of the store's chunks inside the filter, so that about twice
#: those it keeps pass. A filtered HNSW search reads every candidate it visits, and its document,
#: to test the filter: on 1,971 passages, for filters passing 95% down to 20% of the chunks, the
#: unfiltered KNN of 1.25 x 20 chunks over that share, filtered after, took 5.6-19 ms where the
#: 80-vector filtered KNN took 30-126 ms (ad hoc; whole searches: ``benchmarks/filtered_latency.py``).
POST_FILTER_READ = 2
#: The largest first KNN a search post-filters; a filter passing a smaller share of the store goes
#: through the filtered KNN. At 0.1 ms a vector read, 2,000 still cost less than the filtered KNN of
#: a filter passing 2% (136 against 329 ms on the passages).
POST_FILTER_MAX = 2000


def post_filtered_size(request: Request, keep: int, passing: ChunkTotals | None) -> int | None:
    """The unfiltered KNN a filtered search reads first, to keep the ``keep`` nearest inside its
    filter; None to filter inside the KNN or scan exactly instead. ``passing``: the chunks inside
    the filter and in the store, when counted. A filter passing fewer documents than the search
    wants is read the other way, which counts the documents inside and stops when it found them
    all (a post-filtered pool would grow to its largest looking for more)."""
    if not request.filter.condition or passing is None:
        return None
    if passing.scope <= surql.CONSTANTS["exact_scan_chunks"] or passing.documents < request.fetch:
        return None
    size = math.ceil(POST_FILTER_READ * keep * passing.store / passing.scope)
    return size if size <= POST_FILTER_MAX else None


def exact_instead(request: Request, fetched: int, candidates: int) -> bool:
    """Whether a filtered chunk KNN that returned ``fetched`` of ``candidates`` vectors should be
    replaced by an exact scan of the chunks inside the filter: when it returned fewer than half the
    pool, the filter passes few chunks or the engine lost some (with a filter passing 24 of 600
    chunks, HNSW returned 9, surrealdb#7423); the scan returns every one of them. A filtered KNN
    comes back a little short even when plenty pass (74 of 80 with half the chunks passing), so
    that alone does not count."""
    return bool(request.filter.condition) and fetched < candidates // 2


def pool_used(request: Request, fetched: int, candidates: int) -> int:
    """``fetched`` as :func:`grow` should read it: a filtered KNN a little short of its pool (see
    :func:`exact_instead`) counts as full, so the pool may still grow."""
    if request.filter.condition and fetched >= candidates // 2:
        return candidates
    return fetched


def grow(candidates: int, found: int, wanted: int, fetched: int) -> int | None:
    """The next, larger KNN pool when a search found fewer than ``wanted`` results although the
    pool came back full (``fetched == candidates``: more vectors may lead to more documents);
    None when there is nothing more to find or the pool is at its limit."""
    if found >= wanted or fetched < candidates or candidates >= MAX_CANDIDATES:
        return None
    return min(candidates * 4, MAX_CANDIDATES)


class Pool:
    """The KNN pool of one search as it is read: ``keep`` vectors ranked, out of ``size`` read. A
    filter passing many chunks (``passing``, counted) is applied to the rows of an unfiltered KNN
    (:func:`post_filtered_size`); a filtered KNN reads ``FILTERED_POOL`` times more than it keeps,
    for the neighbours filtered HNSW search drops, so a filter that passes every chunk ranks as no
    filter does. A filter passing few chunks is read by an exact scan from the start (the query
    decides: ``fragments/nearest_chunks``);
    the pool is read again as an exact scan when a filtered KNN comes back short
    (:func:`exact_instead`), then larger while the search finds fewer documents than the request
    wants (:func:`grow`) and its vectors are above ``threshold`` (none: any similarity); ``size`` is
    None once it is done, or once its documents hold every document inside the filter (when the query
    counted them). An exact scan grows at most once, to ``MAX_CANDIDATES``: each scan reads every chunk
    inside the filter.

    ``unread``: the documents the question names, whose passages come with the first KNN read
    (``fragments/named_passages.surql``); :meth:`read` keeps them in ``passages``."""

    def __init__(
        self,
        request: Request,
        keep: int,
        *,
        threshold: float | None = None,
        dense: LRU | None = None,
        passing: ChunkTotals | None = None,
    ) -> None:
        self.request = request
        self.keep = keep
        post = post_filtered_size(request, keep, passing)
        self.post = post is not None
        self.size: int | None = post or (min(keep * FILTERED_POOL, MAX_CANDIDATES) if request.filter.condition else keep)
        self.exact = False
        self._read = 0  # the chunks the last unfiltered KNN of a post-filtered pool returned
        self.unread: list[str] = []
        self.passages: list[dict[str, Any]] = []
        self._threshold = threshold
        self._inside: frozenset[str] | None = None  # the documents inside the filter, when counted
        self._count = bool(request.filter.condition) and not self.post
        self._dense, self._key = dense, ""
        if self._count and dense is not None:
            self._key = cache_key(request.filter.condition, request.filter.params)
            seen = dense.lookup(self._key)
            self._count = seen is None or time.monotonic() - seen > DENSE_SECONDS

    def read(self, out: Mapping[str, Any], fetched: int) -> bool:
        """Take a KNN's answer ``out`` that returned ``fetched`` vectors of the pool; False when the
        pool is to be read again as an exact scan instead (the answer is then left unused)."""
        assert self.size is not None
        read = out.get("pool") or {}
        if self.post:
            self._read = int(read.get("read") or 0)
        elif self._count:
            # the first read counted the documents inside the filter; later ones count them again
            # only to scan the few chunks inside it exactly
            inside = read.get("inside")
            self._inside = None if inside is None else frozenset(str(key) for key in inside)
            self._count = bool(read.get("exact"))
            if self._inside is None and self._dense is not None:  # more documents than it counts
                self._dense.remember(self._key, time.monotonic())
        if read.get("exact"):
            self.exact = True  # asked for, or the query's own choice: few chunks pass the filter
        elif not self.post and exact_instead(self.request, fetched, self.size):
            self.exact = True
            # counted again, the documents inside are scanned through their chunks alone
            self._count = self._inside is not None
            return False
        if self.unread:
            self.passages, self.unread = out["passages"], []
        return True

    @property
    def inside(self) -> frozenset[str] | None:
        """The keys of the documents inside the filter, when the query counted them."""
        return self._inside

    def grow(self, found: int, fetched: int, lowest: float | None = None, documents: Iterable[str] | None = None) -> None:
        """The next pool after one that returned ``fetched`` vectors, the last of similarity
        ``lowest``, and led to ``found`` results, of ``documents`` (their keys; None when the search
        wants chunks, not documents). A pool that returned nothing, or whose last vector fell below
        the search's ``threshold``, is done: every further vector would too; so is one whose
        documents hold every document inside the filter (a chunk of a document being written or
        removed does not count). A post-filtered pool counts the vectors its unfiltered KNN returned,
        not the fewer inside the filter."""
        assert self.size is not None
        if self.post:
            fetched = self._read
        exhausted = (
            not fetched
            or (self._threshold is not None and lowest is not None and lowest < self._threshold)
            or (self._inside is not None and documents is not None and self._inside <= {str(key) for key in documents})
        )
        used = 0 if exhausted else fetched if self.exact or self.post else pool_used(self.request, fetched, self.size)
        self.size = grow(self.size, found, self.request.fetch, used)
        if self.size is not None and self.exact:
            # an exact scan reads every chunk inside the filter whatever its LIMIT: once more, all of it
            self.size = self.keep = MAX_CANDIDATES
        else:
            self.keep = min(self.keep * 4, MAX_CANDIDATES)

    def params(self) -> dict[str, Any]:
        """The pool's params of ``fragments/nearest_chunks.surql`` and ``fragments/named_passages.surql``:
        whether it counts the documents inside the filter, whether it scans exactly or post-filters,
        how much of the KNN it ranks."""
        return {"keep": self.keep, "exact": self.exact, "count_inside": self._count, "post": self.post}
