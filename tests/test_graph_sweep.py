"""benchmarks/graph_sweep.py, which checks the graph defaults: a setting replayed on a captured
subgraph must rank exactly as the retriever does when it runs with that setting, or the sweep
measures something other than the product."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_documents import QUARTERS, report
from test_side_by_side import write_corpus

from surreal_kgrag import Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.evaluate import load_queries
from surreal_kgrag.retrieval.config import GraphConfig
from surreal_kgrag.retrieval.graph import GraphRetriever

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def sweep(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    sys.modules.pop("graph_sweep", None)
    import graph_sweep

    return graph_sweep


@pytest.fixture
def towns(tmp_path, minilm, spacy_extractor):
    folder = tmp_path / "towns"
    write_corpus(folder)
    with SurrealStore(f"surrealkv://{tmp_path / 'stores' / 'towns'}") as store:
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([folder / "corpus.jsonl"])
        assert summary.failed == 0
    return folder


def test_a_replayed_setting_ranks_as_the_retriever_run_with_it(sweep, towns, minilm):
    queries = load_queries(towns / "queries.jsonl")
    changed = GraphConfig(damping=0.5, own_share=0.4, np_weight=1.0, dense_temperature=0.5, weights={"graph": 1.0, "text": 2.0})
    differs = 0
    with SurrealStore(f"surrealkv://{towns.parent / 'stores' / 'towns'}") as store:
        capturing = sweep.CapturingRetriever(store, embedder=minilm, config=GraphConfig())
        for query in queries:
            default = capturing.search(query.question, k=5)
            capture = capturing.captured
            assert capture is not None and capture.sub.chunks
            assert sweep.replay(capture, GraphRetriever(store, config=GraphConfig()))[:5] == [doc.id for doc in default.documents]
            real = GraphRetriever(store, embedder=minilm, config=changed).search(query.question, k=5)
            assert sweep.replay(capture, GraphRetriever(store, config=changed))[:5] == [doc.id for doc in real.documents], query.question
            differs += [doc.id for doc in real.documents] != [doc.id for doc in default.documents]
    assert differs >= 2  # the changed settings do change rankings, so the comparison above means something


def test_a_replay_keeps_the_documents_the_question_names(sweep, minilm, spacy_extractor):
    """Long reports named by company and quarter: the document channel leads the ranking, and a
    replay that fused without it (as the sweep did) ranked otherwise."""
    docs = [
        SourceDocument(key=f"{quarter} {ticker}", text=report(ticker, quarter), title=f"{quarter} {ticker}", source=f"{quarter} {ticker}.txt")
        for ticker in ("QRTZ", "ZNTH")
        for quarter in QUARTERS
    ]
    questions = [f"What were {name}'s net sales in {quarter}?" for name in ("Quartzline", "Zenith Robotics") for quarter in QUARTERS]
    with SurrealStore("mem://") as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(docs)
        capturing = sweep.CapturingRetriever(store, embedder=minilm, config=GraphConfig())
        without = 0
        for question in questions:
            real = [doc.id for doc in capturing.search(question, k=5).documents]
            capture = capturing.captured
            assert capture is not None and capture.document  # the premise: the question names reports
            assert sweep.replay(capture, GraphRetriever(store, config=GraphConfig()))[:5] == real, question
            capture.document = []
            without += sweep.replay(capture, GraphRetriever(store, config=GraphConfig()))[:5] != real
        assert without >= 1


def test_the_sweep_prints_each_variant_and_the_defaults(sweep, towns, capsys):
    store_dir = towns.parent / "stores"
    assert sweep.main([str(towns), "--store-dir", str(store_dir), "--vary", "damping=0.8,0.3", "max_df=2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line]
    cells = dict(line.strip("| ").split(" | ") for line in rows[1:])
    assert list(cells) == ["defaults", "damping=0.8", "damping=0.3", "max_df=2"]
    assert cells["damping=0.8"] == cells["defaults"]  # 0.8 is the default: replayed, it gives the same figures
    for cell in cells.values():
        r1, r2, r5 = (float(x) for x in cell.split(" / "))
        assert 0 <= r1 <= r2 <= r5 <= 100


def test_a_grid_refuses_a_setting_that_changes_the_subgraph(sweep, towns):
    with pytest.raises(SystemExit):
        sweep.main([str(towns), "--store-dir", str(towns.parent / "stores"), "--grid", "--vary", "damping=0.7,0.8", "max_df=3,5"])
