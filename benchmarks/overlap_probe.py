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

Two parts overlap only if "both at once" is clearly below the sum of the two alone. On this 2-core
machine none did (docs/benchmarks.md): a search's parts run one after the other, so its wall-clock
time is their sum.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from query_profile import store_and_questions, store_arguments

from surreal_kgrag import SurrealStore, make_retriever
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
