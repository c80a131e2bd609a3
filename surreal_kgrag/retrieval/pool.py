"""The KNN pool of one search: how many vectors it reads and ranks, whether it scans exactly, and
when it grows (filtered HNSW search on SurrealDB 3.2 is slow when few vectors pass and can drop
true neighbours, surrealdb#7423)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .base import LRU, MAX_CANDIDATES, Request

#: How much larger the first pool of a filtered chunk KNN is. Filtered HNSW search on SurrealDB
#: 3.2 drops true neighbours (surrealdb#7423): on a 2,400-chunk store the top 10 of a 10-vector
#: filtered KNN held 78-96% of the exact top 10 (filters passing 1-50% of the chunks); taken from a
#: 40-vector pool it held all of them whenever the filter passed at least 5%.
FILTERED_POOL = 4
#: How long a retriever goes straight to the filtered KNN with a filter it found more documents
#: inside than it counts (``fragments/nearest_chunks.surql``): the count reads that many documents,
#: about 15 ms of a 100 ms filtered search on the short passages.
DENSE_SECONDS = 60.0


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
    """The KNN pool of one search as it is read: ``keep`` vectors ranked, out of ``size`` read; a
    filtered KNN reads ``FILTERED_POOL`` times more than it keeps, for the neighbours filtered HNSW
    search drops, so a filter that passes every chunk ranks as no filter does. A filter passing few
    chunks is read by an exact scan from the start (the query decides: ``fragments/nearest_chunks``);
    the pool is read again as an exact scan when a filtered KNN comes back short
    (:func:`exact_instead`), then larger while the search finds fewer documents than the request
    wants (:func:`grow`) and its vectors are above ``threshold`` (none: any similarity); ``size`` is
    None once it is done, or once its documents hold every document inside the filter (when the query
    counted them). An exact scan grows at most once, to ``MAX_CANDIDATES``: each scan reads every chunk
    inside the filter.

    ``unread``: the documents the question names, whose passages come with the first KNN read
    (``fragments/named_passages.surql``); :meth:`read` keeps them in ``passages``."""

    def __init__(self, request: Request, keep: int, *, threshold: float | None = None, dense: LRU | None = None) -> None:
        self.request = request
        self.keep = keep
        self.size: int | None = min(keep * FILTERED_POOL, MAX_CANDIDATES) if request.filter.condition else keep
        self.exact = False
        self.unread: list[str] = []
        self.passages: list[dict[str, Any]] = []
        self._threshold = threshold
        self._inside: frozenset[str] | None = None  # the documents inside the filter, when counted
        self._count = bool(request.filter.condition)
        self._dense, self._key = dense, ""
        if self._count and dense is not None:
            self._key = json.dumps([request.filter.condition, request.filter.params], sort_keys=True, default=str)
            seen = dense.lookup(self._key)
            self._count = seen is None or time.monotonic() - seen > DENSE_SECONDS

    def read(self, out: Mapping[str, Any], fetched: int) -> bool:
        """Take a KNN's answer ``out`` that returned ``fetched`` vectors of the pool; False when the
        pool is to be read again as an exact scan instead (the answer is then left unused)."""
        assert self.size is not None
        read = out.get("pool") or {}
        if self._count:
            # the first read counted the documents inside the filter; later ones count them again
            # only to scan the few chunks inside it exactly
            inside = read.get("inside")
            self._inside = None if inside is None else frozenset(str(key) for key in inside)
            self._count = bool(read.get("exact"))
            if self._inside is None and self._dense is not None:  # more documents than it counts
                self._dense.remember(self._key, time.monotonic())
        if read.get("exact"):
            self.exact = True  # asked for, or the query's own choice: few chunks pass the filter
        elif exact_instead(self.request, fetched, self.size):
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
        removed does not count)."""
        assert self.size is not None
        exhausted = (
            not fetched
            or (self._threshold is not None and lowest is not None and lowest < self._threshold)
            or (self._inside is not None and documents is not None and self._inside <= {str(key) for key in documents})
        )
        used = 0 if exhausted else fetched if self.exact else pool_used(self.request, fetched, self.size)
        self.size = grow(self.size, found, self.request.fetch, used)
        if self.size is not None and self.exact:
            # an exact scan reads every chunk inside the filter whatever its LIMIT: once more, all of it
            self.size = self.keep = MAX_CANDIDATES
        else:
            self.keep = min(self.keep * 4, MAX_CANDIDATES)

    def params(self) -> dict[str, Any]:
        """The pool's params of ``fragments/nearest_chunks.surql`` and ``fragments/named_passages.surql``:
        whether it counts the documents inside the filter, whether it scans exactly, how much of the
        KNN it ranks."""
        return {"keep": self.keep, "exact": self.exact, "count_inside": self._count}
