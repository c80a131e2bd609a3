"""The question's embedding beside the rest of a search (``Start``/``Wait`` in
surreal_kgrag.retrieval.plan): an embedder that leaves this interpreter free (a remote service, a
child process) embeds the question while the hybrid and graph modes run the queries that need no
vector, and the answers are the ones an in-process embedding gives."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from json_server import JsonServer, embeddings_payload

from surreal_kgrag import ConfigurationError, Ingestor, SurrealStore, make_retriever
from surreal_kgrag.embed import OpenAIEmbedder, SentenceTransformerEmbedder, in_own_process
from surreal_kgrag.embed.process import ProcessEmbedding
from surreal_kgrag.retrieval import plan as plans
from surreal_kgrag.retrieval.plan import Call, Compute, Start, Wait

PEOPLE = ["Marie Curie", "Pierre Curie", "Alfred Nobel", "Irene Joliot-Curie", "Ernest Rutherford", "Lise Meitner"]
PLACES = ["Warsaw", "Paris", "Stockholm", "Cambridge", "Vienna", "Berlin"]
QUESTIONS = [
    "Where did Marie Curie study polonium?",
    "Which city did Ernest Rutherford and Lise Meitner both work in?",
    "What did Alfred Nobel write about radium in Stockholm?",
    "Who studied uranium salts in Vienna with Irene Joliot-Curie?",
]


# -- the plan's two steps ---------------------------------------------------------------------------


def test_a_started_call_runs_beside_the_plan():
    """The call waits for an event the plan sets in its next step: it sees it only beside the plan."""
    event = threading.Event()

    def plan() -> plans.Plan[bool]:
        started = yield Start(Call(lambda: event.wait(30), timing="embed"))
        yield Compute(event.set, "rank")
        return (yield Wait(started, "embed"))

    timings: dict[str, float] = {}
    assert plans.run(None, plan(), timings) is True
    assert set(timings) == {"embed", "rank"}


def test_calls_stuck_beside_every_plan_do_not_hold_the_next_searches():
    """With every beside thread held by a call that does not return (a service that never answers),
    the next plan's call runs in its own thread, at once, instead of queueing behind them."""
    release = threading.Event()
    begun = threading.Semaphore(0)

    def stuck_call() -> bool:
        begun.release()
        return release.wait(60)

    def stuck() -> plans.Plan[bool]:
        started = yield Start(Call(stuck_call, timing="embed"))
        return (yield Wait(started, "embed"))

    def plan() -> plans.Plan[str]:
        started = yield Start(Call(lambda: threading.current_thread().name, timing="embed"))
        return (yield Wait(started, "embed"))

    with ThreadPoolExecutor(plans.BESIDE_THREADS) as searches:
        held = [searches.submit(plans.run, None, stuck()) for _ in range(plans.BESIDE_THREADS)]
        try:
            assert all(begun.acquire(timeout=10) for _ in held)  # every beside thread is taken
            assert plans.run(None, plan()) == threading.current_thread().name
        finally:
            release.set()
        assert all(search.result(10) for search in held)
    for _ in range(200):  # each thread is counted free once its call's done-callbacks have run
        if plans.run(None, plan()).startswith("kgrag-beside"):
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the beside threads were not free again after their calls returned")


async def test_a_started_call_runs_beside_the_plan_under_the_async_driver():
    event = asyncio.Event()

    async def waits() -> bool:
        await asyncio.wait_for(event.wait(), 30)
        return True

    def plan() -> plans.Plan[bool]:
        started = yield Start(Call(lambda: False, waits, "embed"))
        yield Compute(event.set, "rank")
        return (yield Wait(started, "embed"))

    assert await plans.arun(None, plan()) is True


def _begins_before_the_next_step(arun: Any = None) -> tuple[plans.Plan[list[bool]], threading.Event]:
    """A plan whose started call notes that it began, then waits to be released; the plan's next
    steps read the note. The next step is often a query on the embedded engine, which holds the GIL
    while it answers, so a call that has not begun by then would begin only after it."""
    begun, release = threading.Event(), threading.Event()

    def run() -> bool:
        begun.set()
        return release.wait(30)

    def plan() -> plans.Plan[list[bool]]:
        seen = []
        for _ in range(20):
            begun.clear()
            started = yield Start(Call(run, arun, "embed"))
            seen.append((yield Compute(begun.is_set, "rank")))
            release.set()
            assert (yield Wait(started, "embed")) is True
            release.clear()
        return seen

    return plan(), release


def test_a_started_call_has_begun_when_the_plan_takes_its_next_step():
    plan, release = _begins_before_the_next_step()
    try:
        assert plans.run(None, plan) == [True] * 20
    finally:
        release.set()


async def test_a_started_call_has_begun_when_the_plan_takes_its_next_step_under_the_async_driver():
    """The async driver lets the call's task begin, and a blocking call's thread (an embedder with
    no async form, or a child process's pipes) begin it, before the plan's next step."""
    plan, release = _begins_before_the_next_step()
    try:
        assert await plans.arun(None, plan) == [True] * 20
    finally:
        release.set()


def test_a_started_calls_error_reaches_the_plan_at_its_wait():
    def fails() -> None:
        raise ConfigurationError("the embedding service refused the key")

    def plan() -> plans.Plan[str]:
        started = yield Start(Call(fails, timing="embed"))
        yield Compute(lambda: None, "rank")  # the plan goes on until it needs the value
        try:
            yield Wait(started, "embed")
        except ConfigurationError as error:
            return f"caught: {error}"
        return "no error"

    assert plans.run(None, plan()) == "caught: the embedding service refused the key"
    assert asyncio.run(plans.arun(None, plan())) == "caught: the embedding service refused the key"


async def test_the_async_driver_cancels_a_started_call_the_plan_never_waited_for():
    ran = asyncio.Event()
    handles = []

    async def slow() -> None:
        ran.set()
        await asyncio.sleep(30)

    def plan(fail_after_it_ran: bool) -> plans.Plan[None]:
        handles.append((yield Start(Call(lambda: None, slow, "embed"))))
        if fail_after_it_ran:
            yield Call(lambda: None, lambda: asyncio.wait_for(ran.wait(), 5), "rank")
        yield Compute(lambda: 1 / 0, "rank")  # the plan fails before it waits

    for fail_after_it_ran in (False, True):
        with pytest.raises(ZeroDivisionError):
            await plans.arun(None, plan(fail_after_it_ran))
        await asyncio.sleep(0)  # the cancellation is delivered at the task's next step
        assert handles[-1].cancelled()
    assert ran.is_set()


# -- searches -----------------------------------------------------------------------------------


def documents(count: int) -> list[str]:
    """Documents of 40 sentences naming people and places that recur across them (several chunks each)."""
    texts = []
    for seed in range(count):
        lines = [
            f"In {1890 + (seed * 7 + i) % 40} {PEOPLE[(seed + i) % 6]} studied polonium in {PLACES[(seed * 3 + i) % 6]} "
            f"with {PEOPLE[(seed * 5 + i + 1) % 6]}, and wrote about radium and uranium salts (note {seed}-{i})."
            for i in range(40)
        ]
        texts.append(" ".join(lines))
    return texts


@pytest.fixture(scope="module")
def curie_store(minilm, spacy_extractor):
    store = SurrealStore("mem://")
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest_texts(
        documents(8), ids=[f"d{i}" for i in range(8)], titles=[f"Notes {i}" for i in range(8)]
    )
    assert summary.failures == [] and summary.chunks >= 16
    yield store
    store.close()


def answers(store: SurrealStore, mode: str, embedder: Any, extractor: Any) -> list[list[tuple[str, float]]]:
    retriever = make_retriever(mode, store, embedder=embedder, **extracting(mode, extractor))
    out = []
    for question in QUESTIONS:
        result = retriever.search(question)
        assert result.timings.other_ms >= 0  # no part counted twice, the embedding beside the queries included
        out.append([(doc.id, doc.score) for doc in result.documents])
    return out


def same(first: list[list[tuple[str, float]]], second: list[list[tuple[str, float]]]) -> None:
    assert [[doc for doc, _ in row] for row in first] == [[doc for doc, _ in row] for row in second]
    assert np.allclose([s for row in first for _, s in row], [s for row in second for _, s in row], atol=1e-4)


def test_a_child_process_embeds_the_questions_and_the_answers_do_not_change(curie_store, minilm, spacy_extractor, monkeypatch, caplog):
    asked: list[Any] = []
    ask = ProcessEmbedding._ask

    def counted(embedding: ProcessEmbedding, texts: Any, limit: float) -> np.ndarray:
        asked.append(texts)
        return ask(embedding, texts, limit)

    monkeypatch.setattr(ProcessEmbedding, "_ask", counted)
    with in_own_process(minilm) as child:
        assert child.wait_until_ready(120) and child.embeds_elsewhere
        with open(f"/proc/{child._child.pid}/environ", "rb") as environ:  # one thread: the other cores are the search's
            assert b"OMP_NUM_THREADS=1" in environ.read().split(b"\0")
        for mode in ("chunk", "concept", "hybrid", "graph"):
            asked.clear()
            same(answers(curie_store, mode, child, spacy_extractor), answers(curie_store, mode, minilm, spacy_extractor))
            if mode == "chunk":  # its first query needs the vector: nothing to run beside, no hand-off
                assert asked == []
            else:
                assert asked == [{"query": question} for question in QUESTIONS]  # each question once, by the child
        # several threads share the child (LangChain's batch): each gets its own question's answer
        retriever = make_retriever("graph", curie_store, embedder=child)
        alone = {question: [doc.id for doc in retriever.search(question).documents] for question in QUESTIONS}
        for question in QUESTIONS:
            retriever.forget(question)
        with ThreadPoolExecutor(4) as pool:
            together = list(pool.map(lambda q: (q, [doc.id for doc in retriever.search(q).documents]), QUESTIONS * 3))
        assert len(together) == 12 and all(found == alone[question] for question, found in together)
        for question in QUESTIONS:  # the async driver starts the child's embedding as a task
            retriever.forget(question)
            assert [doc.id for doc in asyncio.run(retriever.asearch(question)).documents] == alone[question]
        # a text the child cannot embed gets the model's own error, and the child goes on serving
        with pytest.raises(ConfigurationError, match="must be a str"):
            child.embed_query(123)  # type: ignore[arg-type]
        assert child.in_child
        # an ingest with the caller's child leaves it running for the caller
        with SurrealStore("mem://") as other:
            assert Ingestor(other, embedder=child, extractor=spacy_extractor).ingest_texts(documents(1), ids=["one"]).added == 1
        assert child.in_child
        # a child that dies loses no search: the question is embedded here, once the failure is seen
        os.kill(child._child.pid, signal.SIGKILL)
        child._child.wait()
        retriever.forget(QUESTIONS[0])
        with caplog.at_level(logging.WARNING, logger="surreal_kgrag.embed.process"):
            assert [doc.id for doc in retriever.search(QUESTIONS[0]).documents] == alone[QUESTIONS[0]]
        assert "embedding in this process from now on" in caplog.text
    assert not child.in_child  # closed: questions are embedded in this process again
    assert child.embed_query(QUESTIONS[0]) == pytest.approx(minilm.embed_query(QUESTIONS[0]), abs=1e-5)


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="stopping a process takes SIGSTOP (POSIX)")
def test_a_stopped_child_holds_a_search_no_longer_than_its_timeout(curie_store, minilm, spacy_extractor, caplog):
    expected = answers(curie_store, "hybrid", minilm, spacy_extractor)
    with in_own_process(minilm, timeout=1.0) as child:
        assert child.wait_until_ready(120)
        stopped = child._child
        os.kill(stopped.pid, signal.SIGSTOP)
        with caplog.at_level(logging.WARNING, logger="surreal_kgrag.embed.process"):
            same(answers(curie_store, "hybrid", child, spacy_extractor), expected)
        assert stopped.poll() is not None and not child.embeds_elsewhere
        assert caplog.text.count("did not answer within 1.0 s") == 1  # the first question waited; the rest were embedded here


def test_only_a_model_loaded_by_name_can_have_a_process_of_its_own(minilm):
    with pytest.raises(ConfigurationError, match="cannot be loaded in another process"):
        in_own_process(SentenceTransformerEmbedder(minilm.model))


class GatedEmbeddings:
    """An OpenAI-compatible embeddings service answering with MiniLM's vectors, which holds each
    answer until ``release`` is set (or 20 s pass) and records which of the two let it go."""

    def __init__(self, minilm: Any) -> None:
        self.release = threading.Event()
        self.released: list[bool] = []
        self.minilm = minilm

    def __call__(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.released.append(self.release.wait(20))
        return 200, embeddings_payload(self.minilm.embed_documents(texts), body["model"])


@pytest.mark.parametrize("mode", ["hybrid", "graph"])
def test_a_remote_embedding_is_computed_while_the_first_queries_run(curie_store, minilm, spacy_extractor, monkeypatch, mode):
    """The service answers only once the search has sent its BM25 query (with the names the question
    contains, in one round trip; none of them needs the vector): a search that waited for the
    embedding first would hold the service 20 s and find ``released`` false."""
    service = GatedEmbeddings(minilm)
    with JsonServer(service) as server:
        query_many = SurrealStore.query_many

        def first_round_trip(store: SurrealStore, queries: Any) -> Any:
            if any(name == "search_fulltext" for name, _, _ in queries):
                service.release.set()
            return query_many(store, queries)

        monkeypatch.setattr(SurrealStore, "query_many", first_round_trip)
        remote = OpenAIEmbedder("all-MiniLM-L6-v2", base_url=server.base_url, api_key="sk-test", dimensions=384)
        for question in QUESTIONS:
            service.release.clear()
            remote_answer = answers_for(curie_store, mode, remote, spacy_extractor, question)
            assert service.released[-1] is True
            assert remote_answer == answers_for(curie_store, mode, minilm, spacy_extractor, question)


def answers_for(store: SurrealStore, mode: str, embedder: Any, extractor: Any, question: str) -> list[str]:
    return [doc.id for doc in make_retriever(mode, store, embedder=embedder, **extracting(mode, extractor)).search(question).documents]


def extracting(mode: str, extractor: Any) -> dict[str, Any]:
    """Hybrid reads the question's concepts with the extractor the store was built with."""
    return {"extractor": extractor} if mode == "hybrid" else {}
