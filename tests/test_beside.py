"""Work beside the queries: a plan starts a call (the question's embedding), goes on with steps that
do not need it, and waits for it later; on the real embedded engine and the real MiniLM model."""

from __future__ import annotations

import asyncio
import threading

import pytest

from surreal_kgrag import Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.errors import ModelNotAvailableError
from surreal_kgrag.retrieval import make_retriever
from surreal_kgrag.retrieval.plan import Call, Compute, Finish, Query, Start, arun, run

WAIT = 10.0  # seconds a call waits for the plan to go on before it reports that it did not


@pytest.fixture
def store():
    with SurrealStore("mem://") as s:
        s.query("store_meta")  # opened
        yield s


def _beside_plan(gone_on: threading.Event, sync_wait):
    """Starts a call that finishes only once the plan has run a query and a step after it."""
    pending = yield Start(Call(sync_wait, None, "embed"))
    yield Query("store_meta")
    yield Compute(gone_on.set, "rank")
    return (yield Finish(pending))


def _waiter(gone_on: threading.Event):
    def wait() -> str:
        return "went on" if gone_on.wait(WAIT) else "waited alone"

    return wait


def test_a_started_call_runs_while_the_plan_goes_on(store):
    gone_on = threading.Event()
    timings: dict[str, float] = {}
    assert run(store, _beside_plan(gone_on, _waiter(gone_on)), timings) == "went on"
    assert timings["embed"] < WAIT and timings["search"] > 0


async def test_a_started_call_runs_while_the_async_plan_goes_on(store):
    gone_on = threading.Event()
    assert await arun(store, _beside_plan(gone_on, _waiter(gone_on))) == "went on"


def test_a_started_calls_error_is_raised_where_the_plan_waits_for_it(store):
    def failing() -> None:
        raise ModelNotAvailableError("the model is gone")

    def plan():
        pending = yield Start(Call(failing, None, "embed"))
        yield Query("store_meta")
        try:
            yield Finish(pending)
        except ModelNotAvailableError as error:
            return f"caught: {error}"

    assert run(store, plan()) == "caught: the model is gone"


async def test_a_call_the_plan_never_waits_for_is_cancelled(store):
    started: list = []

    async def forever() -> None:
        await asyncio.sleep(3600)

    def plan():
        started.append((yield Start(Call(lambda: None, forever, "embed"))))
        yield Query("store_meta")
        raise ValueError("the plan gave up")

    with pytest.raises(ValueError, match="gave up"):
        await arun(store, plan())
    await asyncio.sleep(0)  # the cancellation is delivered on the loop's next turn
    assert started[0].running.cancelled()


class _WaitsForQuery:
    """MiniLM, embedding a question only once the store has been sent the query ``name`` (one that
    needs no embedding), or after WAIT seconds: whether it ran beside that query or before it."""

    def __init__(self, inner, store: SurrealStore, name: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.asked = threading.Event()
        self.beside: list[bool] = []
        query_many = store.query_many

        def spy(steps):
            if any(step[0] == name for step in steps):
                self.asked.set()
            return query_many(steps)

        store.query_many = spy  # type: ignore[method-assign]

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.beside.append(self.asked.wait(WAIT))
        return self.inner.embed_query(text)

    async def aembed_query(self, text):
        return await asyncio.to_thread(self.embed_query, text)


DOCS = [
    ("curie", "Marie Curie", "Marie Curie was a physicist born in Warsaw. She discovered polonium and radium with Pierre Curie."),
    ("warsaw", "Warsaw", "Warsaw is the capital of Poland, on the Vistula. Marie Curie was born there in 1867."),
    ("polonium", "Polonium", "Polonium is a radioactive element named after Poland, discovered by Marie Curie in 1898."),
    ("vistula", "Vistula", "The Vistula is the longest river in Poland; it flows through Krakow and Warsaw."),
]


@pytest.mark.parametrize(("mode", "first"), [("graph", "graph_names"), ("concept", "graph_names"), ("hybrid", "search_fulltext")])
def test_the_question_is_embedded_beside_the_first_queries(minilm, spacy_extractor, mode, first):
    with SurrealStore("mem://") as s:
        Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest(
            [SourceDocument(key=key, title=title, text=text, source=f"{key}.txt") for key, title, text in DOCS]
        )
        question = "Which element named after Poland did Marie Curie discover?"
        plain = make_retriever(mode, s, embedder=minilm).search(question, k=3, embedding=minilm.embed_query(question).tolist())
        embedder = _WaitsForQuery(minilm, s, first)
        retriever = make_retriever(mode, s, embedder=embedder)
        result = retriever.search(question, k=3)
        assert embedder.beside == [True]  # the question was embedded while that query ran
        # The embedding that arrived late ranks exactly as one given up front.
        assert [(d.id, [c.id for c in d.chunks]) for d in result.documents] == [(d.id, [c.id for c in d.chunks]) for d in plain.documents]
        assert result.timings.embed_ms < WAIT * 1000  # only the wait for the embedding is its part
        # The same question again: its embedding is remembered, so nothing is computed beside anything.
        assert retriever.search(question, k=3).timings.embed_ms == 0
        assert embedder.beside == [True]
