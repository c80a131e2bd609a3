"""Two real 10-Q filings ingested with the real models: every result says on which page and in which
section its text is (core, LangChain, LlamaIndex, tools, CLI output, graph view), and the file
metadata the loaders add filters in every mode and integration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surreal_kgrag.cli import main as cli_main
from surreal_kgrag.graph_view import graph_data
from surreal_kgrag.ingest import Ingestor
from surreal_kgrag.retrieval import make_retriever
from surreal_kgrag.retrieval.results import RetrievalResult
from surreal_kgrag.store import SurrealStore
from surreal_kgrag.tools import ToolDispatcher

FILINGS = Path(__file__).resolve().parents[2] / "shared" / "bench" / "sec10q" / "docs"
pytestmark = pytest.mark.skipif(not FILINGS.exists(), reason=f"the sec10q filings are not at {FILINGS}")
Q3, Q2 = "2023 Q3 AAPL.pdf", "2023 Q2 AAPL.pdf"
QUESTION = "total net sales of products and services, net income, condensed consolidated statements of operations"
MODES = ("chunk", "concept", "hybrid", "graph")


@pytest.fixture(scope="module")
def kg(tmp_path_factory, minilm, spacy_extractor):
    folder = tmp_path_factory.mktemp("filings")
    for name in (Q3, Q2):
        (folder / name).write_bytes((FILINGS / name).read_bytes())
    url = f"surrealkv://{tmp_path_factory.mktemp('store') / 'kg'}"
    with SurrealStore(url) as store:
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([folder])
        assert (summary.added, summary.failed) == (2, 0)
        yield store, folder


def file_of(doc_id: str) -> str:
    return Path(doc_id).name


def test_income_statement_figure_comes_back_with_its_page_and_section(kg, minilm) -> None:
    store, _ = kg
    result = make_retriever("chunk", store, embedder=minilm).search(
        "Total net sales 81,797 82,959 293,787 304,182", k=1, filters={"date": "2023-07-01"}
    )
    (doc,) = result.documents
    assert file_of(doc.id) == Q3
    hits = [c for c in doc.chunks if "Total net sales 81,797 82,959 293,787 304,182" in c.content]
    assert hits, [c.content[:80] for c in doc.chunks]
    assert (hits[0].page_start, hits[0].page_end) == (4, 4)  # the page the PDF shows the statement on
    assert hits[0].section[-1] == "CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS (Unaudited)"


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_filters_on_file_metadata_and_returns_pages(kg, minilm, mode) -> None:
    store, _ = kg
    retriever = make_retriever(mode, store, embedder=minilm)
    later = retriever.search(QUESTION, k=5, filters={"date": {"$gte": "2023-06-01"}})
    earlier = retriever.search(QUESTION, k=5, filters={"metadata.date": {"$lt": "2023-06-01"}, "year": 2023})
    assert [file_of(d.id) for d in later.documents] == [Q3]
    assert [file_of(d.id) for d in earlier.documents] == [Q2]
    produced = retriever.search(QUESTION, k=5, filters={"pdf_producer": {"$exists": True}, "pages": {"$gte": 20}})
    assert sorted(file_of(d.id) for d in produced.documents) == sorted([Q2, Q3])
    for doc in later.documents + earlier.documents:
        assert doc.chunks and all(c.page_start is not None and 1 <= c.page_start <= c.page_end <= 29 for c in doc.chunks)  # type: ignore[operator]


def test_langchain_documents_carry_pages_sections_and_filter(kg, minilm) -> None:
    from langchain_surreal_kgrag import SurrealKGRetriever

    store, _ = kg
    retriever = SurrealKGRetriever.from_retriever(make_retriever("hybrid", store, embedder=minilm, k=2))
    (doc,) = retriever.invoke(QUESTION, filters={"date": {"$lt": "2023-06-01"}})
    assert file_of(doc.metadata["source"]) == Q2 and doc.metadata["date"] == "2023-04-01"
    pages, sections = doc.metadata["chunk_pages"], doc.metadata["chunk_sections"]
    assert len(pages) == len(sections) == len(doc.metadata["chunk_ids"])
    assert all(isinstance(p, list) and 1 <= p[0] <= p[1] for p in pages) and any(sections)


def test_llama_index_nodes_carry_pages_sections_and_filter(kg, minilm) -> None:
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
    from llama_index.retrievers.surreal_kgrag import SurrealKGRetriever

    store, _ = kg
    filters = MetadataFilters(filters=[MetadataFilter(key="date", value="2023-06-01", operator=">=")])
    nodes = SurrealKGRetriever.from_retriever(
        make_retriever("graph", store, embedder=minilm), similarity_top_k=3, filters=filters
    ).retrieve(QUESTION)
    assert nodes and {file_of(n.node.metadata["source"]) for n in nodes} == {Q3}
    for n in nodes:
        assert 1 <= n.node.metadata["page_start"] <= n.node.metadata["page_end"] <= 29
        assert isinstance(n.node.metadata["section"], str)
    assert any(n.node.metadata["section"] for n in nodes)


def test_tools_cli_and_graph_view_show_pages(kg, minilm, capsys) -> None:
    store, _ = kg
    tools = ToolDispatcher(store, embedder=minilm)
    found = json.loads(tools.call("search_chunks", {"query": QUESTION, "k": 1, "filters": {"date": "2023-07-01"}}))
    passage = found["documents"][0]["chunks"][0]
    assert 1 <= passage["page_start"] <= passage["page_end"] <= 29 and passage["section"]
    document = json.loads(tools.call("get_document", {"document_id": found["documents"][0]["id"]}))
    assert document["chunks"][0]["page_start"] == 1
    result: RetrievalResult = make_retriever("chunk", store, embedder=minilm).search(QUESTION, k=1)
    chunk = result.documents[0].chunks[0]
    labels = [n.label for n in graph_data(result).nodes if n.kind == "chunk"]
    assert any(f"p. {chunk.page_start}" in label for label in labels)
    # The CLI opens the same store again: connections are shared per URL inside a process.
    assert cli_main(["query", QUESTION, "--db", store.config.url, "--mode", "chunk", "-k", "1"]) == 0
    out = capsys.readouterr().out
    assert "[p. " in out
