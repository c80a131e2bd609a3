"""Honest timing: every search reports its wall-clock time and the parts that add up to it, on the
real embedded SurrealDB with the real MiniLM and spaCy models; eval's latency is that wall-clock."""

from __future__ import annotations

import statistics
import time

import pytest

from surreal_kgrag import Ingestor, MMRReranker, SourceDocument, SurrealStore
from surreal_kgrag.eval_baselines import ChunkTable, bm25_rankings, cosine_rankings
from surreal_kgrag.evaluate import EvalQuery, evaluate_retriever
from surreal_kgrag.retrieval import make_retriever
from surreal_kgrag.retrieval.results import Timings

MODES = ["chunk", "concept", "hybrid", "graph"]
CORPUS = [
    ("curie", "Marie Curie", "Marie Curie was a physicist and chemist born in Warsaw. She discovered polonium and radium."),
    ("warsaw", "Warsaw", "Warsaw is the capital of Poland, on the Vistula river. It was the birthplace of Marie Curie."),
    ("polonium", "Polonium", "Polonium is a radioactive element named after Poland. Marie Curie discovered it in 1898."),
    ("nobel", "Alfred Nobel", "Alfred Nobel was a Swedish chemist who invented dynamite and founded the Nobel Prize."),
    ("vistula", "Vistula", "The Vistula is the longest river in Poland. It flows through Krakow and Warsaw to the Baltic Sea."),
    ("dynamite", "Dynamite", "Dynamite is an explosive made from nitroglycerin, invented by Alfred Nobel in Sweden."),
]
QUESTIONS = [
    ("Which element did the physicist born in Warsaw discover?", ["polonium"]),
    ("Who invented dynamite?", ["nobel", "dynamite"]),
    ("Which river flows through Warsaw?", ["vistula"]),
    ("Who invented dynamite?", ["nobel", "dynamite"]),  # asked twice: eval forgets it first (see below)
    ("What is the capital of Poland?", ["warsaw"]),
]
# Parts are measured inside the call and other_ms is the remainder: they add up to the wall-clock
# up to float rounding, and the remainder is never negative (no part is counted twice).
ROUNDING_MS = 1e-6


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        docs = [SourceDocument(key=key, title=title, text=text, source=f"{key}.txt") for key, title, text in CORPUS]
        Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest(docs)
        yield s


def _retriever(store, minilm, spacy_extractor, mode, **options):
    extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
    retriever = make_retriever(mode, store, embedder=minilm, **extra, **options)
    retriever.search("load the models first", k=3)
    return retriever


def _check(timings: Timings, outside_ms: float) -> None:
    parts = timings.parts()
    assert all(ms >= 0 for part, ms in parts.items() if part != "other"), parts
    assert timings.other_ms >= -ROUNDING_MS, timings
    assert sum(parts.values()) == pytest.approx(timings.wall_ms, abs=ROUNDING_MS), timings
    assert timings.wall_ms >= timings.database_ms > 0, timings
    assert timings.wall_ms >= timings.database_ms + timings.embed_ms + timings.analyze_ms, timings
    assert outside_ms >= timings.wall_ms, (outside_ms, timings)


@pytest.mark.parametrize("mode", MODES)
def test_parts_add_up_to_the_wall_clock(store, minilm, spacy_extractor, mode):
    retriever = _retriever(store, minilm, spacy_extractor, mode)
    started = time.perf_counter()
    result = retriever.search("Which element did Marie Curie discover?", k=3)
    outside_ms = (time.perf_counter() - started) * 1000
    timings = result.timings
    _check(timings, outside_ms)
    assert timings.embed_ms > 0  # a new question is embedded inside the call
    assert timings.hydrate_ms > 0  # every mode shapes its results
    if mode != "chunk":  # the question is read (spaCy, n-grams) and the channels ranked client-side
        assert timings.analyze_ms > 0 and timings.rank_ms > 0, timings
    # The parts account for the call: what none of them names is a small share of it.
    assert timings.other_ms < 0.5 * timings.wall_ms, timings
    # The old names still read the parts.
    assert (result.search_ms, result.embed_ms, result.analyze_ms) == (timings.database_ms, timings.embed_ms, timings.analyze_ms)
    assert result.model_dump()["timings"]["wall_ms"] == timings.wall_ms


@pytest.mark.parametrize("mode", MODES)
async def test_async_parts_add_up_to_the_wall_clock(store, minilm, spacy_extractor, mode):
    retriever = _retriever(store, minilm, spacy_extractor, mode)
    started = time.perf_counter()
    result = await retriever.asearch("Who founded the Nobel Prize?", k=3)
    _check(result.timings, (time.perf_counter() - started) * 1000)
    assert result.timings.embed_ms > 0


def test_a_given_embedding_costs_no_embedding_time(store, minilm, spacy_extractor):
    retriever = _retriever(store, minilm, spacy_extractor, "graph")
    embedding = minilm.embed_query("Which river flows through Krakow?").tolist()
    result = retriever.search("Which river flows through Krakow?", k=3, embedding=embedding)
    assert result.timings.embed_ms == 0
    _check(result.timings, float("inf"))


def test_the_reranker_is_a_part(store, minilm, spacy_extractor):
    retriever = _retriever(store, minilm, spacy_extractor, "hybrid", reranker=MMRReranker(store, embedder=minilm), rerank_pool=5)
    started = time.perf_counter()
    result = retriever.search("Which element did Marie Curie discover?", k=2)
    _check(result.timings, (time.perf_counter() - started) * 1000)
    assert result.timings.rerank_ms > 0


@pytest.mark.parametrize("mode", MODES)
def test_eval_reports_wall_clock_with_the_embedding(store, minilm, spacy_extractor, mode):
    retriever = _retriever(store, minilm, spacy_extractor, mode)
    outside: list[float] = []
    search = retriever.search

    def timed_search(*args, **kwargs):
        started = time.perf_counter()
        try:
            return search(*args, **kwargs)
        finally:
            outside.append((time.perf_counter() - started) * 1000)

    retriever.search = timed_search
    queries = [EvalQuery(id=str(i), question=q, gold_ids=gold) for i, (q, gold) in enumerate(QUESTIONS)]
    report = evaluate_retriever(retriever, queries, (1, 5))
    assert len(outside) == len(queries) + 1  # one untimed warm-up, then each question once
    parts = report.parts_p50_ms
    assert set(parts) == set(Timings.PARTS)
    assert report.p95_ms >= report.p50_ms >= parts["database"] > 0, report
    assert parts["embed"] > 0, report  # the questions are embedded inside the timed call
    assert report.p50_ms >= parts["embed"], report
    assert report.p50_ms <= statistics.median(outside[1:]), (report, outside)
    flat = report.flat()
    assert (flat["p50_ms"], flat["p95_ms"]) == (round(report.p50_ms, 2), round(report.p95_ms, 2))
    assert flat["parts_p50_ms"]["database"] == round(parts["database"], 2)


@pytest.mark.parametrize("mode", ["chunk", "hybrid"])
def test_a_forgotten_question_is_embedded_and_analysed_again(store, minilm, spacy_extractor, mode):
    retriever = _retriever(store, minilm, spacy_extractor, mode)
    question = "Which sea does the Vistula flow into?"
    first = retriever.search(question, k=2).timings
    cached = retriever.search(question, k=2).timings
    assert first.embed_ms > 0 and cached.embed_ms == 0 and cached.analyze_ms <= first.analyze_ms
    retriever.forget(question)
    again = retriever.search(question, k=2).timings
    assert again.embed_ms > 0, again
    if mode == "hybrid":  # spaCy reads the question again
        assert cached.analyze_ms < again.analyze_ms, (cached, again)


def test_baselines_are_timed_alike(store, minilm):
    table = ChunkTable.read(store)
    queries = [EvalQuery(id=str(i), question=q, gold_ids=gold) for i, (q, gold) in enumerate(QUESTIONS)]
    for ranking in cosine_rankings(table, minilm, queries, 5):
        t = ranking.timings
        assert t.wall_ms >= t.embed_ms + t.rank_ms and t.embed_ms > 0 and t.rank_ms > 0, t
        assert sum(t.parts().values()) == pytest.approx(t.wall_ms, abs=ROUNDING_MS)
    for ranking in bm25_rankings(table, queries, 5):
        t = ranking.timings
        assert t.wall_ms >= t.analyze_ms + t.rank_ms and t.analyze_ms > 0 and t.embed_ms == 0, t
