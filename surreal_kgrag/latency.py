"""Latency figures as every report prints them: p50 / p95 of the wall-clock time of whole calls, with
the median of each part beside them (:class:`~surreal_kgrag.retrieval.results.Timings`).

The modes and the baselines are timed alike: the wall-clock time of answering one new question, its
embedding included (a baseline without an embedding, BM25, pays for tokenising it instead)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel, Field

from .retrieval.results import PART_BUCKETS, Timings

T = TypeVar("T")

#: What the latency figures of ``eval``, the retrieval benchmark and ``side_by_side`` mean.
LATENCY_NOTE = (
    "p50/p95: wall-clock time of each whole call, question embedding included (a new question each time), "
    "for the modes and the baselines alike; parts: the median of each part, which do not add up to the p50"
)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (1-99) of ``values``, interpolated as ``numpy.percentile`` does."""
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1])


class Latency(BaseModel):
    p50_ms: float = Field(description="median wall-clock time of a whole call, the question's embedding included")
    p95_ms: float
    parts_p50_ms: dict[str, float] = Field(
        default_factory=dict,
        description="median of each part (embed, analyze, database, rank, hydrate, rerank, other); medians do not add up to p50_ms",
    )

    @classmethod
    def of(cls, timings: Sequence[Timings]) -> Latency:
        walls = [t.wall_ms for t in timings]
        parts = {part: percentile([t.parts()[part] for t in timings], 50) for part in Timings.PARTS}
        return cls(p50_ms=percentile(walls, 50), p95_ms=percentile(walls, 95), parts_p50_ms=parts)


class Stopwatch:
    """Times one call part by part: ``watch.time(part, fn, *args)`` runs ``fn`` and adds its time to
    ``part``; ``watch.timings()`` is the wall-clock time since the stopwatch started, with its parts."""

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._parts: dict[str, float] = {}

    def time(self, part: str, fn: Callable[..., T], *args: object) -> T:
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self._parts[part] = self._parts.get(part, 0.0) + time.perf_counter() - start

    def timings(self) -> Timings:
        return Timings.of(time.perf_counter() - self._started, {PART_BUCKETS[part]: s for part, s in self._parts.items()})
