"""The one sans-I/O mechanism behind every retriever, agent tool and LLM feature.

A *plan* is a generator that yields the I/O it needs and receives the answers:

- :class:`Query`: run ``surql/<name>.surql`` with bound params; the answer is one result per statement;
- :class:`Concurrently`: several queries at once; the answer is a list of those answers;
- :class:`Call`: anything else that may block (embedding a text, extracting concepts, reranking,
  a chat request to a model), given as a function and, when it has one, its native async twin;
- :class:`Compute`: the plan's own work on the CPU (ranking, shaping results), run in place by both
  drivers and timed under its bucket, so a search can say where its wall-clock time went;
- :class:`Gather`: several calls at once, at most ``limit`` in flight; the answer lists each call's
  value or the :class:`~surreal_kgrag.errors.KGRagError` it raised, so one failure does not stop
  the others;
- :class:`Start` and :class:`Wait`: a call begun now and its value taken later, so the plan's
  other steps run meanwhile (the question's embedding beside the queries that do not need it).

It returns its result when it is done. :func:`run` drives a plan with blocking calls and
:func:`arun` with awaited ones, so a retriever, a tool or an LLM feature is written once for both,
and a tool that searches simply ``yield from``\\ s the retriever's plan. A step that raises has its
exception thrown into the plan at the ``yield`` that asked for it: the plan may catch it (to retry,
or to send a model its error) or let it propagate to the caller.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..db import SurrealStore
from ..db.loops import gather_or_cancel, submit_begun, to_thread_begun
from ..errors import ConfigurationError, KGRagError
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


@dataclass(frozen=True)
class Compute:
    """Client-side work that does not wait on I/O: run in place by both drivers (never in a worker
    thread), as the plan's own code would be, and timed under ``timing``."""

    run: Callable[[], Any]
    timing: str


@dataclass(frozen=True)
class Gather:
    """Several calls at once, at most ``limit`` in flight (worker threads under :func:`run`, tasks
    under :func:`arun`). Its time is recorded under ``timing``."""

    calls: tuple[Call, ...]
    limit: int = 4
    timing: str = "call"


@dataclass(frozen=True)
class Start:
    """Begin ``call`` beside the plan and answer with its handle at once (a future under
    :func:`run`, a task under :func:`arun`); ``Wait(handle)`` later answers with its value or
    raises its error. Only work that leaves this interpreter free (a remote service, a child
    process) gains from it: a model run in a thread of this process lost time to the embedded
    engine's queries, which hold the GIL while they run (``benchmarks/overlap_probe.py``)."""

    call: Call


@dataclass(frozen=True)
class Wait:
    """The value of a call begun by :class:`Start`; the time waited is recorded under ``timing``."""

    started: Any
    timing: str = "call"


Step = Query | Concurrently | Call | Compute | Gather | Start | Wait
Plan = Generator[Step, Any, T]

#: The bucket the time spent in queries is recorded under.
SEARCH = "search"


def run(store: SurrealStore | None, plan: Plan[T], timings: dict[str, float] | None = None) -> T:
    """Drive ``plan`` with blocking calls; seconds spent per bucket are added to ``timings``.
    ``store`` answers the queries (None for a plan that makes none)."""
    steps = _Steps(plan, timings)
    with steps:
        while (step := steps.next()) is not None:
            start = time.perf_counter()
            try:
                steps.answered(step, start, _run(store, step))
            except Exception as raised:  # handed to the plan, which handles or re-raises it
                steps.failed(step, start, raised)
    return steps.value


async def arun(store: SurrealStore | None, plan: Plan[T], timings: dict[str, float] | None = None) -> T:
    """Drive ``plan`` on the store's async connection; a ``Call`` without an async twin runs in a
    worker thread so it does not block the event loop (a started one holds it until its thread
    has begun: ``db.loops.to_thread_begun``)."""
    steps = _Steps(plan, timings)
    with steps:
        while (step := steps.next()) is not None:
            start = time.perf_counter()
            try:
                steps.answered(step, start, await _arun(store, step))
            except Exception as raised:  # handed to the plan, which handles or re-raises it
                steps.failed(step, start, raised)
    return steps.value


class _Steps:
    """What both drivers keep while they drive a plan: the answer or error its next step is sent,
    the time of each step, and the calls it started. A started call the plan did not wait for (it
    failed, or the caller was cancelled) is cancelled when the plan ends, if it has not begun."""

    def __init__(self, plan: Plan[Any], timings: dict[str, float] | None) -> None:
        self.plan = plan
        self.timings = {} if timings is None else timings
        self.value: Any = None
        self._answer: Any = None
        self._error: Exception | None = None
        self._started: list[Any] = []  # futures (run) or tasks (arun)

    def next(self) -> Step | None:
        """The plan's next step; None once it has returned (its value in ``value``)."""
        try:
            return self.plan.throw(self._error) if self._error is not None else self.plan.send(self._answer)
        except StopIteration as done:
            self.value = done.value
            return None

    def answered(self, step: Step, start: float, answer: Any) -> None:
        self._answer, self._error = answer, None
        if isinstance(step, Start):
            self._started.append(answer)
        _add(self.timings, step, time.perf_counter() - start)

    def failed(self, step: Step, start: float, error: Exception) -> None:
        self._answer, self._error = None, error
        _add(self.timings, step, time.perf_counter() - start)

    def __enter__(self) -> _Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        for started in self._started:
            if not started.done():
                started.cancel()
            elif not started.cancelled():
                started.exception()  # read, so that an error the plan never waited for is not reported as lost


def _run(store: SurrealStore | None, step: Step) -> Any:
    if isinstance(step, Compute):
        return step.run()
    if isinstance(step, Start):
        return _start_beside(step.call)
    if isinstance(step, Wait):
        return step.started.result()
    if isinstance(step, Query):
        return _store(store, step).query(step.name, step.params, **step.placeholders)
    if isinstance(step, Concurrently):
        return _store(store, step).query_many([query.step() for query in step.queries])
    if isinstance(step, Gather):
        if len(step.calls) <= 1 or step.limit == 1:
            return [_captured(call.run) for call in step.calls]
        with ThreadPoolExecutor(max_workers=min(step.limit, len(step.calls)), thread_name_prefix="kgrag-plan") as pool:
            return list(pool.map(lambda call: _captured(call.run), step.calls))
    return step.run()


async def _arun(store: SurrealStore | None, step: Step) -> Any:
    if isinstance(step, Compute):
        return step.run()
    if isinstance(step, Start):
        # The call begins (to its first wait; a blocking one, in its thread) before the plan's next query.
        task = asyncio.create_task(_acall(step.call, to_thread_begun))
        await asyncio.sleep(0)
        return task
    if isinstance(step, Wait):
        return await step.started
    if isinstance(step, Query):
        return await _store(store, step).aquery(step.name, step.params, **step.placeholders)
    if isinstance(step, Concurrently):
        return await _store(store, step).aquery_many([query.step() for query in step.queries])
    if isinstance(step, Gather):
        semaphore = asyncio.Semaphore(max(1, step.limit))

        async def bounded(call: Call) -> Any:
            async with semaphore:
                try:
                    return await _acall(call)
                except KGRagError as error:
                    return error

        return await gather_or_cancel([bounded(call) for call in step.calls])
    return await _acall(step)


async def _acall(call: Call, in_thread: Callable[[Callable[[], Any]], Awaitable[Any]] = asyncio.to_thread) -> Any:
    if call.arun is not None:
        return await call.arun()
    return await in_thread(call.run)


#: The threads that wait for started calls: a call beside a plan spends its time waiting on another
#: process or a service, so a few threads serve every search of the process.
BESIDE_THREADS = 8
_BESIDE: ThreadPoolExecutor | None = None
_BESIDE_LOCK = threading.Lock()
_BESIDE_BUSY = 0  # started calls not finished yet


def _start_beside(call: Call) -> Future[Any]:
    """``call`` begun in a beside thread; run here at once when every beside thread is taken (calls
    stuck on a service that does not answer would otherwise hold every later search in the queue)."""
    global _BESIDE, _BESIDE_BUSY
    with _BESIDE_LOCK:
        full = _BESIDE_BUSY >= BESIDE_THREADS
        if not full:
            _BESIDE_BUSY += 1
            if _BESIDE is None:
                _BESIDE = ThreadPoolExecutor(max_workers=BESIDE_THREADS, thread_name_prefix="kgrag-beside")
            pool = _BESIDE
    if full:
        done: Future[Any] = Future()
        try:
            done.set_result(call.run())
        except Exception as error:
            done.set_exception(error)
        return done
    started = submit_begun(pool, call.run)
    started.add_done_callback(_beside_done)
    return started


def _beside_done(_: Future[Any]) -> None:
    global _BESIDE_BUSY
    with _BESIDE_LOCK:
        _BESIDE_BUSY -= 1


def _forget_beside() -> None:
    """In a forked child the parent's threads do not exist: it starts its own."""
    global _BESIDE, _BESIDE_LOCK, _BESIDE_BUSY
    _BESIDE, _BESIDE_LOCK, _BESIDE_BUSY = None, threading.Lock(), 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_beside)


def _captured(run: Callable[[], Any]) -> Any:
    try:
        return run()
    except KGRagError as error:
        return error


def _store(store: SurrealStore | None, step: Step) -> SurrealStore:
    if store is None:
        raise ConfigurationError(f"this plan runs queries ({type(step).__name__}); drive it with a store")
    return store


def _add(timings: dict[str, float], step: Step, seconds: float) -> None:
    if isinstance(step, Start):
        bucket = step.call.timing
    elif isinstance(step, (Call, Compute, Gather, Wait)):
        bucket = step.timing
    else:
        bucket = SEARCH
    timings[bucket] = timings.get(bucket, 0.0) + seconds
