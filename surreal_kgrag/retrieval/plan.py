"""The one sans-I/O mechanism behind every retriever and agent tool.

A *plan* is a generator that yields the I/O it needs and receives the answers:

- :class:`Query`: run ``surql/<name>.surql`` with bound params; the answer is one result per statement;
- :class:`Concurrently`: several queries at once; the answer is a list of those answers;
- :class:`Call`: anything else that may block (embedding a text, extracting concepts, reranking),
  given as a function and, when it has one, its native async twin.

It returns its result when it is done. :func:`run` drives a plan with blocking calls and
:func:`arun` with awaited ones, so a retriever or a tool is written once for both, and a tool that
searches simply ``yield from``\\ s the retriever's plan.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..store import SurrealStore
from ..surql import CompiledFilter

T = TypeVar("T")


@dataclass(frozen=True)
class Query:
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    placeholders: Mapping[str, int | CompiledFilter] = field(default_factory=dict)

    def step(self) -> tuple[str, Mapping[str, Any], Mapping[str, Any]]:
        return self.name, self.params, self.placeholders


@dataclass(frozen=True)
class Concurrently:
    queries: tuple[Query, ...]


@dataclass(frozen=True)
class Call:
    """Work that is not a query. ``timing`` names the bucket its time is recorded under."""

    run: Callable[[], Any]
    arun: Callable[[], Awaitable[Any]] | None = None
    timing: str = "call"


Step = Query | Concurrently | Call
Plan = Generator[Step, Any, T]

#: The bucket the time spent in queries is recorded under.
SEARCH = "search"


def run(store: SurrealStore, plan: Plan[T], timings: dict[str, float] | None = None) -> T:
    """Drive ``plan`` with blocking calls; seconds spent per bucket are added to ``timings``."""
    timings = {} if timings is None else timings
    answer: Any = None
    try:
        while True:
            step = plan.send(answer)
            start = time.perf_counter()
            if isinstance(step, Query):
                answer = store.query(step.name, step.params, **step.placeholders)
            elif isinstance(step, Concurrently):
                answer = store.query_many([query.step() for query in step.queries])
            else:
                answer = step.run()
            _add(timings, step, time.perf_counter() - start)
    except StopIteration as done:
        return done.value


async def arun(store: SurrealStore, plan: Plan[T], timings: dict[str, float] | None = None) -> T:
    """Drive ``plan`` on the store's async connection; a ``Call`` without an async twin runs in a
    worker thread so it never blocks the event loop."""
    timings = {} if timings is None else timings
    answer: Any = None
    try:
        while True:
            step = plan.send(answer)
            start = time.perf_counter()
            if isinstance(step, Query):
                answer = await store.aquery(step.name, step.params, **step.placeholders)
            elif isinstance(step, Concurrently):
                answer = await store.aquery_many([query.step() for query in step.queries])
            elif step.arun is not None:
                answer = await step.arun()
            else:
                answer = await asyncio.to_thread(step.run)
            _add(timings, step, time.perf_counter() - start)
    except StopIteration as done:
        return done.value


def _add(timings: dict[str, float], step: Step, seconds: float) -> None:
    bucket = step.timing if isinstance(step, Call) else SEARCH
    timings[bucket] = timings.get(bucket, 0.0) + seconds
