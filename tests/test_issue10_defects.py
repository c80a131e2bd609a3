"""Defects listed at the top of issue 10 that no other test guards, on the real engine and models.
(The others are guarded where their feature is tested; the report to the lead names each test.)"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore, make_retriever
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.tools import ToolDispatcher

MODES = ["chunk", "concept", "hybrid", "graph"]
TEXTS = {
    "curie": "Marie Curie was born in Warsaw. She discovered polonium with Pierre Curie in Paris. Polonium is named after Poland.",
    "pierre": "Pierre Curie was a French physicist. He married Marie Curie in Paris. He studied magnetism and crystals.",
    "warsaw": "Warsaw is the capital of Poland. The Vistula river flows through Warsaw to the Baltic Sea.",
    "nobel": "Alfred Nobel invented dynamite in Sweden. The Nobel Prize is awarded in Stockholm. Marie Curie won it twice.",
    "baltic": "The Baltic Sea borders Poland and Sweden. Gdansk lies on the Baltic Sea near the Vistula delta.",
    "radium": "Radium was isolated by Marie Curie and Pierre Curie. Radium glows in the dark and was sold in Paris.",
}
QUESTIONS = [
    "Where was Marie Curie born?",
    "Who invented dynamite?",
    "Which river flows through Warsaw?",
    "What did Pierre Curie study?",
    "Which sea borders Poland and Sweden?",
    "Who isolated radium in Paris?",
]


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        config = IngestConfig(chunker=SentenceChunker(max_tokens=14, overlap_tokens=0))
        documents = [SourceDocument(key=key, text=text, title=key.title(), source=f"{key}.txt") for key, text in TEXTS.items()]
        # Keys that differ only by surrounding whitespace are different documents.
        documents += [
            SourceDocument(key=" curie", text="A leading space: Marie Curie lived in Paris.", source="lead.txt"),
            SourceDocument(key="curie ", text="A trailing space: Marie Curie lived in Warsaw.", source="trail.txt"),
        ]
        summary = Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents)
        assert summary.added == len(documents)
        yield s


def test_get_document_keeps_whitespace_in_ids(store, minilm):
    """`get_document` stripped whitespace from ids: " curie" read "curie"."""
    tools = ToolDispatcher(store, embedder=minilm)
    for key, source in (("curie", "curie.txt"), (" curie", "lead.txt"), ("curie ", "trail.txt")):
        document = json.loads(tools.call("get_document", {"document_id": key}))
        assert document["id"] == key and document["source"] == source
    missing = json.loads(tools.call("get_document", {"document_id": " curie "}))
    assert missing["error"]["type"] == "not_found"


def test_every_mode_on_one_retriever_from_many_threads_equals_the_sequential_run(store, minilm, spacy_extractor):
    """The query caches (embeddings, the concepts a question names, chunk totals per scope) are shared
    by a retriever's threads, as LangChain's `batch` shares them: several threads running every mode,
    each mode on one retriever, return what one thread returns, call for call."""

    def build(mode):
        extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
        return make_retriever(mode, store, embedder=minilm, **extra)

    def answer(retriever, question):
        result = retriever.search(question, k=3)
        return [(d.id, round(d.score, 6), [c.id for c in d.chunks]) for d in result.documents]

    expected = {(mode, q): answer(build(mode), q) for mode in MODES for q in QUESTIONS}
    assert all(expected.values())
    shared = {mode: build(mode) for mode in MODES}  # fresh caches, filled by the threads
    calls = [(mode, q) for _ in range(3) for mode in MODES for q in QUESTIONS]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda call: answer(shared[call[0]], call[1]), calls))
    assert results == [expected[call] for call in calls]


async def test_async_tasks_on_one_retriever_equal_the_sequential_run(store, minilm, spacy_extractor):
    retriever = make_retriever("hybrid", store, embedder=minilm, extractor=spacy_extractor)
    expected = [[d.id for d in retriever.search(q, k=3).documents] for q in QUESTIONS]
    fresh = make_retriever("hybrid", store, embedder=minilm, extractor=spacy_extractor)
    results = await asyncio.gather(*(fresh.asearch(q, k=3) for q in QUESTIONS * 2))
    assert [[d.id for d in r.documents] for r in results] == expected * 2
