"""Whether the parts of a search can run beside one another on the embedded engine.

    .venv/bin/python benchmarks/overlap_probe.py ../shared/bench/hotpotqa --store-dir /work/kg-bench [--limit 60]

It reads the store ``retrieval_benchmark.py`` built for the folder and prints three measurements,
each a p50 over the first ``--limit`` questions, every question text made new for each timing so
that no cache answers it:

1. **The engine and the GIL.** A pure-Python thread counts in a loop, alone and then while the main
   thread runs queries (the graph mode's first round trip, over and over). The ratio of the two rates
   is the share of a query's time the engine leaves the interpreter to other threads.
2. **The embedding beside the first round trip.** The question's embedding alone; the graph mode's
   first round trip alone (the stored names, BM25 and the document names: nothing in it needs the
   embedding); and both at once, the embedding in a worker thread.
3. **The embedding beside spaCy** (the hybrid mode's reading of the question): each alone, then
   both at once.
4. **An engine that leaves the interpreter free**, as a server does (without the network): the
   graph mode's first round trip, its queries as this package sends them, replayed on the store
   once it is closed here through the SDK's async embedded engine, whose queries run on the
   engine's own threads: one after another, side by side, and side by side while this interpreter
   embeds the question. Read only: that engine never writes its memtables to disk (``docs/servers.md``),
   and the probe writes nothing.

Two parts overlap only if "both at once" is clearly below the sum of the two alone. On this 2-core
machine none of 2 and 3 did (docs/benchmarks.md): a search's parts run one after the other, so its
wall-clock time is their sum. In 4, the round's queries side by side took 1-10 ms less than on the
blocking engine, and the embedding beside them gained nothing: the model and the engine share the
two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import surrealdb
from query_profile import store_and_questions, store_arguments

from surreal_kgrag import SurrealStore, make_retriever
from surreal_kgrag.db import sdk, sdk_fastpath
from surreal_kgrag.embed import resolve_embedder
from surreal_kgrag.extract import resolve_extractor
from surreal_kgrag.retrieval.plan import Concurrently, Query


def first_round(store: SurrealStore, retriever: Any, question: str, dimension: int) -> None:
    """Drive the graph mode's plan up to and including its first round trip (a zero vector stands
    for the embedding, which the plan does not read before then)."""
    plan = retriever.plan(question, embedding=[0.0] * dimension)
    step = next(plan)
    while not isinstance(step, Concurrently):
        step = plan.send(store.query(*step.step()[:2], **step.placeholders) if isinstance(step, Query) else step.run())
    store.query_many([query.step() for query in step.queries])
    plan.close()


def recorded_first_round(store: SurrealStore, retriever: Any, question: str, dimension: int) -> list[tuple[str, dict[str, Any]]]:
    """The first round trip's queries (text and bound params) as the package sends them."""
    sent: list[tuple[str, dict[str, Any]]] = []
    send = sdk.query

    def record(db: Any, text: str, params: Any) -> dict[str, Any]:
        sent.append((text, dict(params)))
        return send(db, text, params)

    first_round(store, retriever, question, dimension)  # the counts a search caches, read before
    sdk.query = record  # type: ignore[assignment]
    try:
        first_round(store, retriever, question, dimension)
    finally:
        sdk.query = send  # type: ignore[assignment]
    return sent


class AsyncEngine:
    """The SDK's async embedded engine on an event loop of its own thread: a query sent runs on the
    engine's threads while the caller goes on (``surrealdb_embedded``'s ``AsyncEmbeddedDB``)."""

    def __init__(self, path: str, namespace: str, database: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.db = surrealdb.AsyncSurreal(f"surrealkv://{path}")
        self.wait(sdk.aopen(self.db, namespace, database, None))
        self.engine = sdk_fastpath.engine(self.db)
        if self.engine is None:
            raise RuntimeError(f"the SDK's async embedded connection has no engine handle: {sdk_fastpath.missing()}")

    def wait(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    def send(self, text: str, params: dict[str, Any]) -> Any:
        payload = sdk_fastpath.encode_query(text, params)

        async def execute() -> bytes:
            return bytes(await self.engine.execute(payload))

        return asyncio.run_coroutine_threadsafe(execute(), self.loop)

    def run(self, jobs: list[tuple[str, dict[str, Any]]], side_by_side: bool) -> list[Any]:
        if side_by_side:
            sent = [self.send(text, params) for text, params in jobs]
            return [sdk_fastpath.decode(answer.result()) for answer in sent]
        return [sdk_fastpath.decode(self.send(text, params).result()) for text, params in jobs]

    def close(self) -> None:
        self.wait(sdk.aclose(self.db))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def p50_ms(run: Callable[[str], Any], questions: list[str], tag: str) -> float:
    times = []
    for i, question in enumerate(questions):
        started = time.perf_counter()
        run(f"{question} {tag}{i}")
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def beside(first: Callable[[str], Any], second: Callable[[str], Any], questions: list[str], tag: str) -> float:
    """p50 of ``first`` in a worker thread while ``second`` runs in this one, to both done."""
    with ThreadPoolExecutor(1) as worker:

        def both(question: str) -> None:
            pending = worker.submit(first, question)
            second(question)
            pending.result()

        return p50_ms(both, questions, tag)


def spin_rate(seconds: float, work: Callable[[], None] | None = None) -> float:
    """Loop iterations a second of a pure-Python thread, alone or while ``work`` runs."""
    stop, count = threading.Event(), [0]

    def spin() -> None:
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    started = time.perf_counter()
    try:
        if work is None:
            time.sleep(seconds)
        else:
            while time.perf_counter() - started < seconds:
                work()
    finally:
        elapsed = time.perf_counter() - started
        stop.set()
        thread.join()
    return count[0] / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    store_arguments(parser, limit=60)
    found = store_and_questions(parser.parse_args())
    if found is None:
        return 2
    store_path, questions = found
    embedder, extractor = resolve_embedder(None), resolve_extractor(None)
    with SurrealStore(f"surrealkv://{store_path}") as store:
        retriever = make_retriever("graph", store, embedder=embedder)
        for question in questions[:5]:  # load the models, warm the engine's caches
            retriever.search(question)
            extractor.extract([question])
        dimension = embedder.dimension

        def queries(question: str) -> None:
            first_round(store, retriever, question, dimension)

        alone = spin_rate(1.0)
        during = spin_rate(3.0, lambda: queries(questions[0]))
        print(f"1. a pure-Python thread: {alone:,.0f} loops/s alone, {during:,.0f} while the engine answers queries ({during / alone:.0%})")

        embed, first = p50_ms(embedder.embed_query, questions, "a"), p50_ms(queries, questions, "b")
        both = beside(embedder.embed_query, queries, questions, "c")
        print(f"2. embedding {embed:.1f} ms, first round trip {first:.1f} ms: sum {embed + first:.1f}, at once {both:.1f}")

        spacy = p50_ms(lambda q: extractor.extract([q]), questions, "d")
        both = beside(embedder.embed_query, lambda q: extractor.extract([q]), questions, "e")
        embed = p50_ms(embedder.embed_query, questions, "f")
        print(f"3. embedding {embed:.1f} ms, spaCy {spacy:.1f} ms: sum {embed + spacy:.1f}, at once {both:.1f}")

        rounds = {question: recorded_first_round(store, retriever, question, dimension) for question in questions}
        blocking = p50_ms(lambda tagged: replayed(store, rounds[untagged(tagged)]), questions, "g")
        expected = [answer["result"] for answer in replayed(store, rounds[questions[0]])]
        engine_args = (str(store_path), store.config.namespace, store.config.database)
    gc.collect()  # the blocking engine is dropped, and with it its lock on the store
    return on_async_engine(engine_args, rounds, expected, blocking, embedder)


def replayed(store: SurrealStore, jobs: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Recorded queries sent again, one after another, to the store's blocking engine."""
    db = store._conn().db
    return [sdk.query(db, text, params) for text, params in jobs]


def untagged(question: str) -> str:
    """The question ``p50_ms`` made new (it appends a word)."""
    return question.rsplit(" ", 1)[0]


def on_async_engine(
    engine_args: tuple[str, str, str], rounds: dict[str, list[tuple[str, dict[str, Any]]]], expected: list[Any], blocking: float,
    embedder: Any,
) -> int:
    """Measurement 4: the recorded first rounds replayed on the async engine, whose answers to the
    first question must be ``expected`` (the blocking engine's)."""
    questions = list(rounds)
    engine = AsyncEngine(*engine_args)  # the store's path, namespace and database
    try:
        answers = [answer["result"] for answer in engine.run(rounds[questions[0]], side_by_side=True)]
        if [[s.get("result") for s in a] for a in answers] != [[s.get("result") for s in a] for a in expected]:
            print("4. the async engine answered the first round differently: not compared")
            return 1

        def replay(side_by_side: bool) -> Callable[[str], Any]:
            return lambda tagged: engine.run(rounds[untagged(tagged)], side_by_side)

        after, together = p50_ms(replay(False), questions, "h"), p50_ms(replay(True), questions, "i")
        with_model = beside(replay(True), embedder.embed_query, questions, "j")
        embed = p50_ms(embedder.embed_query, questions, "k")
    finally:
        engine.close()
    queries = statistics.median(len(jobs) for jobs in rounds.values())
    print(
        f"4. the first round trip ({queries:.0f} queries): blocking engine {blocking:.1f} ms; async engine one after another "
        f"{after:.1f}, side by side {together:.1f}; embedding {embed:.1f} ms, with the side-by-side round at once {with_model:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
